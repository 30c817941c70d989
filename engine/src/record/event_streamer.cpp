// EventStreamer: the observer that serializes the session's events once and hands the same records to a
// recording file and to the debugger's connection. on_event runs on the engine's thread and only
// encodes and queues; the file is written by RecordingWriter's thread, the connection by this one's.
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "tensorscope/recording.h"

namespace ts {
namespace {

// Sends bytes to a file descriptor from a background thread, in the order they were queued.
// When the other end is gone (EPIPE), what is queued is dropped.
class ConnectionWriter {
 public:
  explicit ConnectionWriter(int fd) : fd_(fd), thread_([this] { loop(); }) {}
  ~ConnectionWriter() { close(); }

  void send(std::string bytes, bool urgent) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ || broken_) return;
    pending_ += bytes;
    // batched: a training loop makes thousands of small events a second
    if (urgent || pending_.size() > (64u << 10)) wake_.notify_one();
  }
  void close() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
      wake_.notify_one();
    }
    thread_.join();
  }

 private:
  void loop() {
    std::string out;
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      wake_.wait_for(lock, std::chrono::milliseconds(20), [&] { return stopping_ || pending_.size() > (64u << 10); });
      out.swap(pending_);
      const bool stop = stopping_;
      lock.unlock();
      size_t done = 0;
      while (done < out.size()) {
        ssize_t n = ::write(fd_, out.data() + done, out.size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          std::lock_guard<std::mutex> l(mutex_);
          broken_ = true;
          break;
        }
        done += static_cast<size_t>(n);
      }
      out.clear();
      lock.lock();
      if (stop && pending_.empty()) return;
    }
  }

  int fd_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::string pending_;
  bool stopping_ = false, broken_ = false;
  std::thread thread_;  // last: starts after the members it uses
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
    impl_->connection->send(frame_bytes('I', run_info_to_json(info)), true);
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
    impl_->connection->send(std::move(bytes), e.kind == EventKind::Schedule);
  }
  if (impl_->file) impl_->file->add(std::move(blobs), std::move(e));
}

void EventStreamer::finish(const RunInfo& end) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (impl_->finished) return;
  impl_->finished = true;
  if (impl_->file) impl_->file->finish(end);
  if (impl_->connection) {
    if (!end.ended.empty()) impl_->connection->send(frame_bytes('X', run_info_to_json(end)), true);
    impl_->connection->close();
  }
}

}  // namespace ts
