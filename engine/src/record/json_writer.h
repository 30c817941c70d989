// A minimal streaming JSON writer for the event payloads: appends to one string, no tree, no
// allocation per value. Output is RFC 8259 JSON (strings escaped; bytes that are not UTF-8 become U+FFFD, so that
// every payload reads back).
#pragma once
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

namespace ts {

class JsonWriter {
 public:
  JsonWriter() { out_.reserve(512); }  // a launch's payload without growing the string on the way
  JsonWriter& begin_object() { return open('{'); }
  JsonWriter& end_object() { return close('}'); }
  JsonWriter& begin_array() { return open('['); }
  JsonWriter& end_array() { return close(']'); }
  // Inside an object: the key of the value that follows. Keys are the payloads' own field names (ASCII
  // letters and '_'), written as they are: no escaping to look for.
  JsonWriter& key(std::string_view k) {
    separate();
    out_.push_back('"');
    out_.append(k);
    out_.append("\":", 2);
    after_key_ = true;
    return *this;
  }
  JsonWriter& value(std::string_view s) {
    separate();
    string(s);
    return *this;
  }
  JsonWriter& value(const char* s) { return value(std::string_view(s)); }
  JsonWriter& value(const std::string& s) { return value(std::string_view(s)); }
  JsonWriter& value(bool b) { return raw(b ? "true" : "false"); }
  JsonWriter& value(int v) { return value(static_cast<int64_t>(v)); }
  JsonWriter& value(int64_t v) { return integer(v); }
  JsonWriter& value(uint64_t v) { return integer(v); }
  JsonWriter& value(double v) {
    if (!(v == v) || v > 1e308 || v < -1e308) return raw("null");  // JSON has no NaN/Inf
    char buf[32];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // the shortest text that reads back as v
    std::string_view s(buf, static_cast<size_t>(end - buf));
    raw(s);
    if (s.find_first_of(".eE") == std::string_view::npos) out_ += ".0";  // stays a number_float on reading
    return *this;
  }
  JsonWriter& null() { return raw("null"); }
  // Already-serialized JSON (e.g. an object kept as text).
  JsonWriter& raw(std::string_view json) {
    separate();
    out_.append(json);
    return *this;
  }
  std::string take() { return std::move(out_); }

 private:
  template <typename T>
  JsonWriter& integer(T v) {
    char buf[24];
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
    return raw(std::string_view(buf, static_cast<size_t>(end - buf)));
  }
  JsonWriter& open(char c) {
    separate();
    out_.push_back(c);
    if (++depth_ >= 64) throw std::logic_error("JsonWriter: nested deeper than 63");  // our payloads: 5
    has_value_ &= ~(uint64_t{1} << depth_);
    return *this;
  }
  JsonWriter& close(char c) {
    out_.push_back(c);
    depth_--;
    return *this;
  }
  void separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (depth_ == 0) return;
    const uint64_t bit = uint64_t{1} << depth_;
    if (has_value_ & bit) out_.push_back(',');
    has_value_ |= bit;
  }
  // Length of the valid UTF-8 sequence at s[i] (1-4), or 0 when it is not valid UTF-8.
  static size_t utf8_length(std::string_view s, size_t i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    if (n == 0 || i + n > s.size()) return 0;
    for (size_t k = 1; k < n; k++)
      if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) return 0;
    return n;
  }
  // Appends runs of bytes that need no escape in one go (most of a listing); escapes the rest.
  void string(std::string_view s) {
    out_.push_back('"');
    size_t run = 0;  // start of the bytes not appended yet
    for (size_t i = 0; i < s.size();) {
      const unsigned char c = static_cast<unsigned char>(s[i]);
      if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
        i++;
        continue;
      }
      if (c >= 0x80) {  // valid UTF-8 stays as it is, anything else becomes U+FFFD
        if (const size_t n = utf8_length(s, i)) {
          i += n;
          continue;
        }
      }
      out_.append(s.data() + run, i - run);
      switch (c) {
        case '"': out_ += "\\\""; break;
        case '\\': out_ += "\\\\"; break;
        case '\n': out_ += "\\n"; break;
        case '\t': out_ += "\\t"; break;
        case '\r': out_ += "\\r"; break;
        default:
          if (c >= 0x80) {
            out_ += "\\ufffd";
          } else {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out_ += buf;
          }
      }
      run = ++i;
    }
    out_.append(s.data() + run, s.size() - run);
    out_.push_back('"');
  }

  std::string out_;
  int depth_ = 0;            // containers open
  uint64_t has_value_ = 0;   // bit d: the container at depth d holds a value (the next one needs a comma)
  bool after_key_ = false;
};

}  // namespace ts
