// EventStreamer: the observer that serializes the session's events once and hands the same records to a
// recording file and to the debugger's connection. on_event runs on the engine's thread: it encodes,
// sends to the connection, and queues for the file (written by RecordingWriter's thread).
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <mutex>

#include "tensorscope/recording.h"

namespace ts {
namespace {

// Sends bytes to the debugger on the engine's thread, at once: a runner that crashes right after a
// kernel has already sent that kernel (a send to a local socket with room in its buffer takes ~1 µs;
// when the debugger reads slower than the script emits, the script waits for it). When the other end
// is gone, later sends are dropped; MSG_NOSIGNAL: no SIGPIPE.
class ConnectionWriter {
 public:
  explicit ConnectionWriter(int fd) : fd_(fd) {}
  void send(std::string_view bytes) {
    while (!broken_ && !bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        broken_ = true;
        break;
      }
      bytes.remove_prefix(static_cast<size_t>(n));
    }
  }

 private:
  int fd_;
  bool broken_ = false;
};

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct EventStreamer::Impl {
  EventEncoder encoder;
  std::unique_ptr<RecordingWriter> file;
  std::unique_ptr<ConnectionWriter> connection;
  int64_t start_ns = now_ns();
  std::mutex mutex;  // the session emits under its own lock; this one guards finish() against on_event
  bool finished = false;
};

EventStreamer::EventStreamer(const RunInfo& info, const std::string& record_path, int connection_fd)
    : impl_(std::make_unique<Impl>()) {
  if (!record_path.empty()) impl_->file = std::make_unique<RecordingWriter>(record_path, info);
  if (connection_fd >= 0) {
    impl_->connection = std::make_unique<ConnectionWriter>(connection_fd);
    impl_->connection->send(frame_bytes('I', run_info_to_json(info)));
  }
}

EventStreamer::~EventStreamer() { finish(RunInfo{}); }

void EventStreamer::on_event(uint64_t seq, const Event& event) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (impl_->finished) return;
  std::vector<Blob> blobs;
  EncodedEvent e = impl_->encoder.encode(seq, now_ns() - impl_->start_ns, event, blobs);
  if (impl_->connection) {
    std::string bytes;
    for (const Blob& b : blobs) bytes += frame_bytes('B', blob_frame_body(b));
    bytes += frame_bytes('E', event_frame_body(e));
    impl_->connection->send(bytes);
  }
  if (impl_->file) impl_->file->add(std::move(blobs), std::move(e));
}

void EventStreamer::finish(const RunInfo& end) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (impl_->finished) return;
  impl_->finished = true;
  if (impl_->file) impl_->file->finish(end);
  if (impl_->connection) {
    if (!end.ended.empty()) impl_->connection->send(frame_bytes('X', run_info_to_json(end)));
  }
}

}  // namespace ts
