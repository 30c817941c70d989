// Recordings: the session's event stream, serialized once and sent to a file, a connection, or both.
//
// A recording (`.tsrec`) is an SQLite database (WAL mode) written while the program runs: the run (script,
// argv, device, versions, how it ended), the events in emission order, and content-addressed blobs (an IR
// listing or a source that a training loop repeats 1000 times is stored once). The schema, its version
// (PRAGMA user_version) and the payload of each event kind are documented in docs/recording.md.
//
// The same serializer (EventEncoder) feeds the runner's connection to the debugger: a stream of frames
// (run info, blob, event, end) that a FrameParser cuts back into the same records. One schema, one
// serializer, two transports (RenderDoc's model: a capture is what the tool would have seen live).
//
// Errors: everything that reads a recording or a frame throws RecordingError with one line that names the
// file (or "connection") and the reason; it never crashes on bad input (fuzzed in tests/recording).
#pragma once
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tensorscope/session.h"

namespace ts {

// One line, always: control characters that a damaged file put into the message (a garbled kind, a
// hash, SQLite quoting a broken schema) become spaces.
class RecordingError : public std::runtime_error {
 public:
  explicit RecordingError(std::string what) : std::runtime_error(one_line(std::move(what))) {}

 private:
  static std::string one_line(std::string s) {
    std::replace_if(s.begin(), s.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; }, ' ');
    return s;
  }
};

// The `run` table. Times are nanoseconds since the Unix epoch.
struct RunInfo {
  std::string script_path;
  std::string script_text;
  std::vector<std::string> argv;
  std::string device;             // the default device the script ran on ("C", "OPENCL:0", ...)
  std::string device_properties;  // JSON object: Device.properties() of that device
  std::string version;            // Tensorscope's version
  std::string python_version;
  int64_t start_time_ns = 0;
  // How the run ended. "" while it runs (or when the program died before it could say: a recording
  // whose `ended` is empty was cut off by a crash or a SIGKILL), then one of "finished", "error",
  // "stopped" (KeyboardInterrupt / Stop), "exit" (a non-zero exit status), "signal" (killed by one).
  std::string ended;
  int exit_status = 0;            // process exit status ("exit", "error"), signal number ("signal")
  std::string end_message;        // one line for people: "ended by signal 11 (SIGSEGV) after kernel #41 r_64_16"
  int64_t end_time_ns = 0;
};

enum class EventKind : uint8_t { Schedule = 1, Launch = 2, Output = 3, Nodes = 4, Trial = 5 };
const char* event_kind_name(EventKind kind);  // "schedule", "launch", "output", "nodes", "trial"
// The kind named by event_kind_name's text; throws RecordingError for another text.
EventKind event_kind_from_name(const std::string& name);

// One serialized event: its payload is JSON (docs/recording.md); listings live in blobs.
struct EncodedEvent {
  uint64_t seq = 0;
  int64_t time_ns = 0;  // since the start of the run
  EventKind kind = EventKind::Output;
  std::string payload;
};

struct Blob {
  std::string hash;  // 16 lowercase hex digits of content_hash(data)
  std::string data;
};

// 64-bit FNV-1a of `data` as 16 hex digits: the blob key and the events' checksum.
std::string content_hash(std::string_view data);

// Serializes events. Stateful: it remembers which blobs it has produced, so each blob is given once.
class EventEncoder {
 public:
  // Appends the blobs this event needs and that were not produced before to `new_blobs`.
  EncodedEvent encode(uint64_t seq, int64_t time_ns, const Event& event, std::vector<Blob>& new_blobs);

 private:
  // The hash of `data`; appends it to `new_blobs` the first time. Copies `data` only then.
  std::string blob(std::string_view data, std::vector<Blob>& new_blobs);
  std::unordered_set<std::string> given_;  // hashes of the blobs produced so far
  // blob() for a listing (an IR snapshot, a source) of a KernelCode that code_hash_ keeps alive. A kernel
  // lowered again (another schedule, a pass that changed nothing) repeats listings in new KernelCode
  // objects: finding one here costs a fast hash and a comparison, not FNV-1a over every byte again.
  std::string listing_blob(const std::string& listing, std::vector<Blob>& new_blobs);
  std::unordered_map<std::string_view, std::string> listing_hash_;  // views into code_hash_'s KernelCodes
  // KernelCode objects already encoded (kept alive so that an address is never reused) → code blob hash
  std::unordered_map<const KernelCode*, std::pair<std::shared_ptr<const KernelCode>, std::string>> code_hash_;
  std::unordered_map<const ScheduleEvent*, std::pair<std::shared_ptr<const ScheduleEvent>, std::string>> structure_hash_;
  std::unordered_map<const NodeBatch*, std::pair<std::shared_ptr<const NodeBatch>, std::string>> batch_hash_;
};

// Turns payloads back into events. Blobs must be added before the events that name them.
class EventDecoder {
 public:
  // Checks the hash against the data (a flipped byte is an error) unless `verify` is false: for a stream
  // from our own runner over a local socket, where the check would only cost the debugger's CPU.
  void add_blob(Blob blob, bool verify = true);
  // Throws RecordingError ("event 12 (launch): ...") for a malformed payload or a missing blob.
  Event decode(const EncodedEvent& event);
  size_t blob_count() const { return blobs_.size(); }
  // With `thin` on, a schedule that repeats a structure (a training loop's steps) is decoded thin: its
  // structure (decoded once, shared), position_uids and kernel_ids, no nodes or kernels of its own (see
  // ScheduleEvent::thin and full_schedule). Its positions and kernel ids are checked all the same. Off
  // (the default), every schedule comes with its nodes and kernels. The debugger keeps them thin and
  // instantiates the ones it shows: instantiating every step's copy of the structure took most of its
  // decoding time, and freeing them most of its exit.
  void keep_schedules_thin(bool thin) { keep_thin_ = thin; }

 private:
  const std::string& blob(const std::string& hash) const;
  std::shared_ptr<const KernelCode> code(const std::string& hash);  // the code blob `hash`, decoded once
  // a cached schedule's event from its structure blob (decoded once) and what the payload adds
  ScheduleEvent thin_schedule(const std::string& structure, std::vector<uint64_t> position_uids,
                              const std::vector<int>& kernel_ids, int schedule_id, SourceLocation where);
  // a nodes event with its batch blob (decoded once), checked against it
  NodesEvent nodes(NodesEvent n, int64_t count, const std::string& batch);
  std::unordered_map<std::string, std::string> blobs_;
  std::unordered_map<std::string, std::shared_ptr<const KernelCode>> code_;  // decoded once, shared
  // listing blob -> a snapshot holding its text: the passes (of every kernel) that name one blob share one copy
  std::unordered_map<std::string, PassSnapshot> listings_;
  struct Structure {
    std::shared_ptr<const ScheduleEvent> event;  // node uids are positions
    uint64_t positions = 0;                      // 1 + the largest position it names
  };
  std::unordered_map<std::string, Structure> structures_;
  std::unordered_map<std::string, std::shared_ptr<const NodeBatch>> batches_;
  bool keep_thin_ = false;
};

// A RunInfo for a run starting now on `device` ("" = the default device): device properties, Tensorscope's
// version, start time. Throws std::invalid_argument for an unknown device. python_version is the caller's.
RunInfo new_run_info(const std::string& script_path, const std::string& script_text,
                     const std::vector<std::string>& argv, const std::string& device);
int64_t wall_clock_ns();  // nanoseconds since the Unix epoch, for RunInfo's times

// RunInfo as JSON text and back (the `run` frame of a connection, the `run` table's rows).
std::string run_info_to_json(const RunInfo& info);
RunInfo run_info_from_json(std::string_view json);  // throws RecordingError

// ---- the file ---------------------------------------------------------------------------------------

// Writes a recording incrementally. A background thread commits what was added at least every 100 ms
// and at once after each schedule event, so a program killed mid-run loses at most its last 100 ms.
// Throws RecordingError when the file cannot be created (names the path and SQLite's reason).
class RecordingWriter {
 public:
  RecordingWriter(const std::string& path, const RunInfo& info);
  ~RecordingWriter();  // finishes (as "" = cut off, if finish() was not called) and closes
  RecordingWriter(const RecordingWriter&) = delete;
  RecordingWriter& operator=(const RecordingWriter&) = delete;

  void add(std::vector<Blob> blobs, EncodedEvent event);  // any thread; returns at once
  // Writes how the run ended (RunInfo::ended and the fields after it), commits and closes.
  void finish(const RunInfo& end);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Reads a recording. The constructor checks the file (SQLite, our schema, a version this build reads)
// and reads the run; events() decodes every event, verifying checksums and blob hashes.
// Throws RecordingError: "run.tsrec: not a Tensorscope recording (no table 'events')", ...
class RecordingReader {
 public:
  explicit RecordingReader(const std::string& path);
  ~RecordingReader();
  const RunInfo& run() const;
  size_t event_count() const;
  // Calls `on_event(seq, time_ns, event)` for every event in order; `thin_schedules`: as
  // EventDecoder::keep_schedules_thin.
  void read_events(const std::function<void(uint64_t seq, int64_t time_ns, const Event& event)>& on_event,
                   bool thin_schedules = false);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes how the run ended into a recording whose writer died without saying (its `ended` is empty):
// the debugger does it when the runner crashed. Does nothing when the recording already says.
void mark_recording_ended(const std::string& path, const RunInfo& end);

// Copies a recording (also one still being written, WAL included) to `to` with SQLite's backup API.
void copy_recording(const std::string& from, const std::string& to);

// ---- the connection ---------------------------------------------------------------------------------
//
// A frame is  u32 length (little-endian, of what follows) | u8 type | body.
//   'I' run info (JSON)        'B' blob: 16-char hash + data      'E' event: u64 seq, i64 time_ns, u8 kind, payload
//   'X' end (RunInfo JSON)     'C' a command from the debugger to the runner (JSON, e.g. {"command":"stop"})
struct Frame {
  char type = 0;
  std::string body;
};
std::string frame_bytes(char type, std::string_view body);
std::string event_frame_body(const EncodedEvent& event);
EncodedEvent event_from_frame_body(std::string_view body);  // throws RecordingError
std::string blob_frame_body(const Blob& blob);
Blob blob_from_frame_body(std::string_view body);           // throws RecordingError

// Cuts a byte stream into frames (bytes may arrive in any pieces).
class FrameParser {
 public:
  void feed(std::string_view bytes);
  // The next complete frame, or false. Throws RecordingError for a frame longer than kMaxFrame.
  bool next(Frame& frame);
  static constexpr uint32_t kMaxFrame = 1u << 30;

 private:
  std::string buffer_;
  size_t offset_ = 0;
};

// ---- the observer -----------------------------------------------------------------------------------

// Serializes the session's events once and sends them to a recording file and/or a connection (a file
// descriptor: a socket to the debugger). Attach with Session::subscribe. on_event queues a copy of the
// event (its listings and nodes are shared, not copied) for the streamer's encoder thread, which encodes it
// and queues the frames for the connection and the record for the file, which another thread writes. The
// connection's frames go in batches: at a launch or a line of output when nothing was sent for 1 ms,
// and otherwise within 2 ms (a background thread), so a process that dies at once loses at most its
// last 2 ms of events; see event_streamer.cpp.
class EventStreamer : public SessionObserver {
 public:
  EventStreamer(const RunInfo& info, const std::string& record_path, int connection_fd);
  ~EventStreamer() override;
  void on_event(uint64_t seq, const Event& event) override;
  bool wants_nodes() const override { return true; }
  // Encodes every event queued so far and sends the connection's queued frames now: before another frame
  // on the same connection (the debugger's pause frame), so that every event before it arrives first.
  void flush();
  // flush() for a fatal-signal handler (SIGSEGV in a kernel, abort()) in a process that is about to die:
  // gives the encoder thread at most 0.1 s to encode what is queued, then sends the queued frames once no
  // other thread is adding to them or sending them, waiting at most 0.1 s for that (the dying thread may
  // hold the lock itself). Touches only atomics, the frame queue, send(2) and nanosleep(2).
  void flush_on_crash() noexcept;
  // Sends the end (how the run ended) to both, flushes, closes the file. Idempotent.
  void finish(const RunInfo& end);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ts
