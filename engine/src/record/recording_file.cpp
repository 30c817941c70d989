// The .tsrec file: an SQLite database in WAL mode (schema in docs/recording.md).
//
// Writing happens on a background thread that commits every 100 ms at most after an event arrived
// (at once after a schedule), so the script's thread never waits for the disk, and a process that is
// killed leaves a file that opens with every event committed before the kill (WAL survives a crash of
// the process: committed transactions are in the -wal file, which the next reader replays).
// Reading opens the file read-only and checks everything: a recording may come from anywhere.
#include <sqlite3.h>
#include <sys/stat.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "record/json_writer.h"
#include "tensorscope/recording.h"

namespace ts {
namespace {

// 1: the first format. 2: adds the `trial` event kind (autotune trials); a build that reads only 1 refuses
// a version 2 file up front rather than at its first trial. This build reads both.
constexpr int kSchemaVersion = 2;
constexpr int kApplicationId = 0x54537263;  // "TSrc"
constexpr auto kCommitInterval = std::chrono::milliseconds(100);
// A schedule is committed at once, but not sooner than this after the commit before: a loop of tiny
// realizes (a schedule each) would otherwise commit tens of thousands of times a second, each commit
// writing whole pages to the WAL for a few hundred bytes of events.
constexpr auto kScheduleCommitGap = std::chrono::milliseconds(10);

const char* kSchema = R"sql(
CREATE TABLE run(
  script_path TEXT NOT NULL, script_text TEXT NOT NULL, argv TEXT NOT NULL,
  device TEXT NOT NULL, device_properties TEXT NOT NULL, version TEXT NOT NULL, python_version TEXT NOT NULL,
  start_time_ns INTEGER NOT NULL, ended TEXT NOT NULL, exit_status INTEGER NOT NULL, end_message TEXT NOT NULL,
  end_time_ns INTEGER NOT NULL);
CREATE TABLE events(seq INTEGER PRIMARY KEY, kind TEXT NOT NULL, time_ns INTEGER NOT NULL, payload TEXT NOT NULL,
  checksum TEXT NOT NULL);
CREATE TABLE blobs(hash TEXT PRIMARY KEY, data BLOB NOT NULL);
)sql";

// A prepared statement that finalizes itself.
struct Statement {
  sqlite3_stmt* s = nullptr;
  Statement(sqlite3* db, const char* sql, const std::string& what) {
    if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK) throw RecordingError(what + ": " + sqlite3_errmsg(db));
  }
  ~Statement() { sqlite3_finalize(s); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  void text(int i, std::string_view v) { sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT); }
  void blob(int i, std::string_view v) { sqlite3_bind_blob(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT); }
  void integer(int i, int64_t v) { sqlite3_bind_int64(s, i, v); }
  std::string column_text(int i) {
    const unsigned char* t = sqlite3_column_text(s, i);
    return t ? std::string(reinterpret_cast<const char*>(t), sqlite3_column_bytes(s, i)) : std::string();
  }
  std::string column_blob(int i) {
    const void* b = sqlite3_column_blob(s, i);
    return b ? std::string(static_cast<const char*>(b), sqlite3_column_bytes(s, i)) : std::string();
  }
};

void exec(sqlite3* db, const char* sql, const std::string& what) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : sqlite3_errmsg(db);
    sqlite3_free(err);
    throw RecordingError(what + ": " + msg);
  }
}

std::string argv_json(const std::vector<std::string>& argv) {
  JsonWriter w;
  w.begin_array();
  for (const std::string& a : argv) w.value(a);
  w.end_array();
  return w.take();
}

}  // namespace

// ---- writing ------------------------------------------------------------------------------------------

struct RecordingWriter::Impl {
  std::string path;
  sqlite3* db = nullptr;
  std::mutex mutex;
  std::condition_variable wake;
  std::vector<std::pair<std::vector<Blob>, EncodedEvent>> queue;
  bool urgent = false, stopping = false, finished = false;
  std::string error;  // the first write error; later writes are dropped
  std::thread thread;

  void write_batch(std::vector<std::pair<std::vector<Blob>, EncodedEvent>>& batch) {
    if (batch.empty() || !error.empty()) return;
    try {
      exec(db, "BEGIN", path);
      Statement blob(db, "INSERT OR IGNORE INTO blobs(hash, data) VALUES (?, ?)", path);
      Statement event(db, "INSERT INTO events(seq, kind, time_ns, payload, checksum) VALUES (?, ?, ?, ?, ?)", path);
      for (auto& [blobs, e] : batch) {
        for (const Blob& b : blobs) {
          blob.text(1, b.hash);
          blob.blob(2, b.data);
          if (sqlite3_step(blob.s) != SQLITE_DONE) throw RecordingError(path + ": " + sqlite3_errmsg(db));
          sqlite3_reset(blob.s);
        }
        event.integer(1, static_cast<int64_t>(e.seq));
        event.text(2, event_kind_name(e.kind));
        event.integer(3, e.time_ns);
        event.text(4, e.payload);
        event.text(5, content_hash(e.payload));
        if (sqlite3_step(event.s) != SQLITE_DONE) throw RecordingError(path + ": " + sqlite3_errmsg(db));
        sqlite3_reset(event.s);
      }
      exec(db, "COMMIT", path);
    } catch (const RecordingError& e) {
      error = e.what();
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      std::fprintf(stderr, "tensorscope: recording stopped: %s\n", error.c_str());
    }
    batch.clear();
  }

  void loop() {
    std::vector<std::pair<std::vector<Blob>, EncodedEvent>> batch;
    std::unique_lock<std::mutex> lock(mutex);
    auto last_commit = std::chrono::steady_clock::now() - kScheduleCommitGap;
    while (true) {
      wake.wait_for(lock, kCommitInterval, [&] { return urgent || stopping; });
      if (urgent) wake.wait_until(lock, last_commit + kScheduleCommitGap, [&] { return stopping; });
      last_commit = std::chrono::steady_clock::now();
      batch.swap(queue);
      urgent = false;
      const bool stop = stopping;
      lock.unlock();
      write_batch(batch);
      lock.lock();
      if (stop && queue.empty()) return;
    }
  }
};

RecordingWriter::RecordingWriter(const std::string& path, const RunInfo& info) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  std::remove(path.c_str());  // a new recording replaces an old file of that name (and its -wal)
  std::remove((path + "-wal").c_str());
  std::remove((path + "-shm").c_str());
  if (sqlite3_open_v2(path.c_str(), &impl_->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string msg = impl_->db ? sqlite3_errmsg(impl_->db) : "out of memory";
    sqlite3_close(impl_->db);
    throw RecordingError(path + ": cannot create the recording: " + msg);
  }
  try {
    sqlite3* db = impl_->db;
    exec(db, "PRAGMA journal_mode=WAL", path);
    exec(db, "PRAGMA synchronous=NORMAL", path);  // in WAL mode: durable against a crash of the process
    exec(db, ("PRAGMA application_id=" + std::to_string(kApplicationId)).c_str(), path);
    exec(db, ("PRAGMA user_version=" + std::to_string(kSchemaVersion)).c_str(), path);
    exec(db, kSchema, path);
    Statement run(db,
                  "INSERT INTO run VALUES (?, ?, ?, ?, ?, ?, ?, ?, '', 0, '', 0)", path);
    run.text(1, info.script_path);
    run.text(2, info.script_text);
    run.text(3, argv_json(info.argv));
    run.text(4, info.device);
    run.text(5, info.device_properties.empty() ? "{}" : info.device_properties);
    run.text(6, info.version);
    run.text(7, info.python_version);
    run.integer(8, info.start_time_ns);
    if (sqlite3_step(run.s) != SQLITE_DONE) throw RecordingError(path + ": " + sqlite3_errmsg(db));
  } catch (...) {
    sqlite3_close(impl_->db);
    throw;
  }
  impl_->thread = std::thread([impl = impl_.get()] { impl->loop(); });
}

void RecordingWriter::add(std::vector<Blob> blobs, EncodedEvent event) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (impl_->finished) return;
  const bool wake = event.kind == EventKind::Schedule && !impl_->urgent;  // the writer is told once
  if (wake) impl_->urgent = true;
  impl_->queue.emplace_back(std::move(blobs), std::move(event));
  if (wake) impl_->wake.notify_one();
}

void RecordingWriter::finish(const RunInfo& end) {
  {
    std::lock_guard<std::mutex> lock(impl_->mutex);
    if (impl_->finished) return;
    impl_->finished = impl_->stopping = true;
    impl_->wake.notify_one();
  }
  impl_->thread.join();
  if (!end.ended.empty() && impl_->error.empty()) {
    try {
      Statement up(impl_->db, "UPDATE run SET ended = ?, exit_status = ?, end_message = ?, end_time_ns = ?", impl_->path);
      up.text(1, end.ended);
      up.integer(2, end.exit_status);
      up.text(3, end.end_message);
      up.integer(4, end.end_time_ns);
      sqlite3_step(up.s);
    } catch (const RecordingError&) {
    }
  }
  // A finished recording is one file: back to a rollback journal, so that readers (which open it read-only)
  // find no WAL to recover and leave no -wal/-shm files beside it.
  sqlite3_exec(impl_->db, "PRAGMA journal_mode=DELETE", nullptr, nullptr, nullptr);
  sqlite3_close(impl_->db);
  impl_->db = nullptr;
}

RecordingWriter::~RecordingWriter() { finish(RunInfo{}); }


// ---- reading ------------------------------------------------------------------------------------------

struct RecordingReader::Impl {
  std::string path;
  sqlite3* db = nullptr;
  RunInfo run;
  size_t events = 0;

  [[noreturn]] void fail(const std::string& reason) const { throw RecordingError(path + ": " + reason); }
  // SQLite's words for what is wrong with the file, in ours
  [[noreturn]] void fail_sqlite() const {
    const int code = sqlite3_errcode(db) & 0xff;
    if (code == SQLITE_NOTADB) fail("not a Tensorscope recording (not an SQLite database)");
    if (code == SQLITE_CORRUPT) fail("the file is damaged (SQLite: " + std::string(sqlite3_errmsg(db)) + ")");
    fail(std::string("cannot read the recording (SQLite: ") + sqlite3_errmsg(db) + ")");
  }
  int64_t pragma(const char* sql) {
    sqlite3_stmt* s = nullptr;
    if (sqlite3_prepare_v2(db, sql, -1, &s, nullptr) != SQLITE_OK) fail_sqlite();
    int64_t v = 0;
    const int rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) v = sqlite3_column_int64(s, 0);
    sqlite3_finalize(s);
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) fail_sqlite();
    return v;
  }
};

RecordingReader::RecordingReader(const std::string& path) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.path = path;
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) m.fail(std::string("cannot open: ") + std::strerror(errno));
  if (S_ISDIR(st.st_mode)) m.fail("is a directory, not a recording");
  if (st.st_size == 0) m.fail("the file is empty (not a Tensorscope recording)");
  if (sqlite3_open_v2(path.c_str(), &m.db, SQLITE_OPEN_READONLY | SQLITE_OPEN_FULLMUTEX, nullptr) != SQLITE_OK) {
    std::string msg = m.db ? sqlite3_errmsg(m.db) : "out of memory";
    sqlite3_close(m.db);
    m.db = nullptr;
    m.fail("cannot open (SQLite: " + msg + ")");
  }
  try {
    sqlite3_busy_timeout(m.db, 2000);
    const int64_t app = m.pragma("PRAGMA application_id");
    const int64_t version = m.pragma("PRAGMA user_version");
    if (app != kApplicationId) m.fail("not a Tensorscope recording (an SQLite database of another kind)");
    if (version > kSchemaVersion)
      m.fail("written by a newer Tensorscope (schema version " + std::to_string(version) + "; this build reads up to " +
             std::to_string(kSchemaVersion) + ")");
    if (version < 1) m.fail("not a Tensorscope recording (schema version " + std::to_string(version) + ")");
    Statement run(m.db,
                  "SELECT script_path, script_text, argv, device, device_properties, version, python_version, "
                  "start_time_ns, ended, exit_status, end_message, end_time_ns FROM run",
                  path + ": not a Tensorscope recording (no readable table 'run')");
    if (sqlite3_step(run.s) != SQLITE_ROW) m.fail("the run is missing (an empty table 'run')");
    RunInfo& r = m.run;
    r.script_path = run.column_text(0);
    r.script_text = run.column_text(1);
    r.device = run.column_text(3);
    r.device_properties = run.column_text(4);
    r.version = run.column_text(5);
    r.python_version = run.column_text(6);
    r.start_time_ns = sqlite3_column_int64(run.s, 7);
    r.ended = run.column_text(8);
    r.exit_status = static_cast<int>(sqlite3_column_int64(run.s, 9));
    r.end_message = run.column_text(10);
    r.end_time_ns = sqlite3_column_int64(run.s, 11);
    const auto argv = nlohmann::json::parse(run.column_text(2), nullptr, false);
    if (!argv.is_array()) m.fail("the file is damaged: the run's argv is not a JSON array");
    for (const auto& a : argv) {
      if (!a.is_string()) m.fail("the file is damaged: the run's argv holds a non-string");
      r.argv.push_back(a.get<std::string>());
    }
    if (!nlohmann::json::parse(r.device_properties, nullptr, false).is_object())
      m.fail("the file is damaged: the run's device_properties is not a JSON object");
    m.events = static_cast<size_t>(m.pragma("SELECT count(*) FROM events"));
  } catch (...) {
    sqlite3_close(m.db);
    m.db = nullptr;
    throw;
  }
}

RecordingReader::~RecordingReader() { sqlite3_close(impl_->db); }

const RunInfo& RecordingReader::run() const { return impl_->run; }
size_t RecordingReader::event_count() const { return impl_->events; }

void RecordingReader::read_events(const std::function<void(uint64_t, int64_t, const Event&)>& on_event,
                                  bool thin_schedules) {
  Impl& m = *impl_;
  EventDecoder decoder;
  decoder.keep_schedules_thin(thin_schedules);
  {
    Statement blobs(m.db, "SELECT hash, data FROM blobs", m.path + ": no readable table 'blobs'");
    int rc;
    while ((rc = sqlite3_step(blobs.s)) == SQLITE_ROW) {
      try {
        decoder.add_blob({blobs.column_text(0), blobs.column_blob(1)});
      } catch (const RecordingError& e) {
        m.fail(std::string("the file is damaged: ") + e.what());
      }
    }
    if (rc != SQLITE_DONE) m.fail_sqlite();
  }
  Statement events(m.db, "SELECT seq, kind, time_ns, payload, checksum FROM events ORDER BY seq",
                   m.path + ": no readable table 'events'");
  int rc;
  while ((rc = sqlite3_step(events.s)) == SQLITE_ROW) {
    EncodedEvent e;
    e.seq = static_cast<uint64_t>(sqlite3_column_int64(events.s, 0));
    const std::string kind = events.column_text(1);
    try {
      e.kind = event_kind_from_name(kind);
    } catch (const RecordingError& x) {
      m.fail("event " + std::to_string(e.seq) + ": " + x.what());
    }
    e.time_ns = sqlite3_column_int64(events.s, 2);
    e.payload = events.column_text(3);
    if (content_hash(e.payload) != events.column_text(4))
      m.fail("the file is damaged: event " + std::to_string(e.seq) + " does not match its checksum");
    Event ev;
    try {
      ev = decoder.decode(e);
    } catch (const RecordingError& x) {
      m.fail(x.what());
    }
    on_event(e.seq, e.time_ns, ev);
  }
  if (rc != SQLITE_DONE) m.fail_sqlite();
}

void mark_recording_ended(const std::string& path, const RunInfo& end) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    throw RecordingError(path + ": cannot open: " + msg);
  }
  sqlite3_busy_timeout(db, 2000);
  try {
    Statement up(db, "UPDATE run SET ended = ?, exit_status = ?, end_message = ?, end_time_ns = ? WHERE ended = ''", path);
    up.text(1, end.ended);
    up.integer(2, end.exit_status);
    up.text(3, end.end_message);
    up.integer(4, end.end_time_ns);
    if (sqlite3_step(up.s) != SQLITE_DONE) throw RecordingError(path + ": " + sqlite3_errmsg(db));
  } catch (...) {
    sqlite3_close(db);
    throw;
  }
  sqlite3_close(db);
}

void copy_recording(const std::string& from, const std::string& to) {
  sqlite3 *src = nullptr, *dst = nullptr;
  auto close = [&] {
    sqlite3_close(src);
    sqlite3_close(dst);
  };
  if (sqlite3_open_v2(from.c_str(), &src, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    std::string msg = sqlite3_errmsg(src);
    close();
    throw RecordingError(from + ": cannot open: " + msg);
  }
  std::remove(to.c_str());
  if (sqlite3_open_v2(to.c_str(), &dst, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr) != SQLITE_OK) {
    std::string msg = sqlite3_errmsg(dst);
    close();
    throw RecordingError(to + ": cannot create: " + msg);
  }
  sqlite3_backup* b = sqlite3_backup_init(dst, "main", src, "main");
  int rc = b ? sqlite3_backup_step(b, -1) : SQLITE_ERROR;
  if (b) sqlite3_backup_finish(b);
  if (rc != SQLITE_DONE) {
    std::string msg = sqlite3_errmsg(dst);
    close();
    throw RecordingError(to + ": cannot copy the recording: " + msg);
  }
  sqlite3_exec(dst, "PRAGMA journal_mode=DELETE", nullptr, nullptr, nullptr);  // the copy is one file
  close();
}

}  // namespace ts
