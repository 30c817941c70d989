#include "runtime/cache_file.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>

namespace ts {

namespace fs = std::filesystem;

uint64_t fnv1a(std::string_view text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::string file_stem(const std::string& name) {
  if (name.size() <= kMaxFileStem) return name;
  char hash[17];
  std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(fnv1a(name)));
  return name.substr(0, kFileStemPrefix) + "_" + hash;
}

std::string unique_suffix() {
  static std::atomic<uint64_t> counter{0};
  return "." + std::to_string(getpid()) + "." + std::to_string(counter++);
}

bool write_file_atomic(const fs::path& path, std::string_view bytes) {
  const std::string tmp = path.string() + unique_suffix() + ".tmp";
  std::error_code ec;
  {
    std::ofstream out(tmp, std::ios::binary);
    if (out) out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!out) {
      fs::remove(tmp, ec);
      return false;
    }
  }
  fs::rename(tmp, path, ec);
  if (ec) fs::remove(tmp, ec);
  return !ec;
}

}  // namespace ts
