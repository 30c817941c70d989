// EventStreamer: the observer that serializes the session's events once and hands the same records to a
// recording file and to the debugger's connection. on_event runs on the engine's thread: it queues a copy
// of the event (its listings and nodes are shared, immutable) for the encoder thread, which encodes it,
// queues the frames for the connection, and queues the record for the file (written by RecordingWriter's
// thread). Encoding on the engine's thread made a watched run 5-8% slower than one that only queues
// (transformer_tiny.py: 0.04 s of 0.8 s); the encoder runs on the other core while the script runs Python.
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <ctime>
#include <deque>
#include <mutex>
#include <system_error>
#include <thread>

#include "tensorscope/recording.h"

namespace ts {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The frames for the debugger, sent in batches. One send() per event cost the runner three system calls
// per realize and woke the debugger for each frame (a loop of tiny realizes ran 8x slower streamed than
// recorded to a file), so frames are queued and sent together:
//   - at a launch or a line of output when nothing was sent for kMinGap;
//   - by a flusher thread within kMaxDelay of the first frame queued: a script that goes quiet (a long
//     kernel, time.sleep) has its events shown;
//   - at once beyond kMaxQueued bytes (the script waits for a debugger that reads slower than it emits);
//   - before any other frame on the connection (flush(): the gate's pause frame) and at the end.
// A process that dies sends what is queued first: the runner calls flush() from os._exit and
// flush_on_crash() from its handler of fatal signals; one killed (SIGKILL) loses at most its last
// kMaxDelay of events (a recording file: its last 100 ms). When the other end is gone, later frames are dropped; MSG_NOSIGNAL: no SIGPIPE.
class ConnectionWriter {
 public:
  static constexpr int64_t kMinGapNs = 1'000'000;   // 1 ms
  static constexpr auto kMaxDelay = std::chrono::milliseconds(2);
  static constexpr size_t kMaxQueued = size_t{256} << 10;

  explicit ConnectionWriter(int fd) : fd_(fd) {
    try {
      flusher_ = std::thread([this] { flush_loop(); });
    } catch (const std::system_error&) {  // no thread (an address-space limit): every frame goes at once
      unbuffered_ = true;
    }
  }
  ~ConnectionWriter() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    if (flusher_.joinable()) flusher_.join();
    flush();
  }

  // Queues `frame`; `boundary`: a good place to send what is queued (see above).
  void post(std::string_view frame, bool boundary) {
    std::unique_lock<std::mutex> lock(mutex_);
    const bool was_empty = queue_.empty();
    queue_.append(frame);
    if (unbuffered_ || queue_.size() >= kMaxQueued || (boundary && now_ns() - last_send_ns_ >= kMinGapNs)) {
      send_queued();
      return;
    }
    if (was_empty && flusher_idle_) {
      lock.unlock();
      wake_.notify_one();
    }
  }
  // Sends what is queued, now.
  void flush() {
    std::lock_guard<std::mutex> lock(mutex_);
    send_queued();
  }
  // flush() for a fatal-signal handler: the flusher thread may be sending at this moment (then the lock
  // comes free within microseconds), or the dying thread may hold the lock itself (then it never does):
  // tries for at most 0.1 s, sleeping with nanosleep (async-signal-safe) in between.
  void flush_on_crash() noexcept {
    const timespec pause{0, 1'000'000};
    for (int attempt = 0; attempt < 100; attempt++) {
      if (mutex_.try_lock()) {
        send_queued();
        mutex_.unlock();
        return;
      }
      nanosleep(&pause, nullptr);
    }
  }

 private:
  void send_queued() {  // mutex_ held
    std::string_view bytes = queue_;
    while (!broken_ && !bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        broken_ = true;
        break;
      }
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    queue_.clear();
    last_send_ns_ = now_ns();
  }
  void flush_loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stopping_) {
      // idle until a frame is queued (post() wakes us only then), then give the engine's thread kMaxDelay
      // to send it at a boundary before sending it here
      flusher_idle_ = true;
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      flusher_idle_ = false;
      wake_.wait_for(lock, kMaxDelay, [&] { return stopping_; });
      if (!queue_.empty()) send_queued();
    }
  }

  int fd_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::string queue_;
  int64_t last_send_ns_ = 0;
  bool broken_ = false, stopping_ = false, flusher_idle_ = false, unbuffered_ = false;
  std::thread flusher_;
};

// Set in the child of a fork(): the encoder thread is not there, so the child's events (a multiprocessing
// worker's) are dropped instead of queued for nobody (os._exit's flush would wait for them forever). Before
// the encoder thread they went to queues no thread served either.
std::atomic<bool> g_forked_child{false};
void watch_for_fork() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(nullptr, nullptr, [] { g_forked_child.store(true); }); });
}

}  // namespace

// The encoder thread's side of EventStreamer: events wait here, in order, until it encodes them.
//   - The engine's thread queues and returns; it wakes the encoder only when the encoder is idle, and the
//     encoder, once woken, lets kBatchDelay pass before taking what is queued, so a training loop's
//     thousands of events a second cost a wake-up per batch, not one per event.
//   - flush() (the gate's pause frame, os._exit) and finish() wait until every queued event is encoded.
//   - Beyond kMaxPending events the engine's thread waits for the encoder (a debugger that reads slower
//     than the script emits makes the script wait, as before).
//   - No thread (an address-space limit): every event is encoded on the engine's thread.
struct EventStreamer::Impl {
  static constexpr auto kBatchDelay = std::chrono::microseconds(500);
  static constexpr size_t kMaxPending = 4096;

  struct Pending {
    uint64_t seq;
    int64_t time_ns;
    Event event;
  };

  EventEncoder encoder;  // the encoder thread's (or, with no thread, the engine's under `mutex`)
  std::unique_ptr<RecordingWriter> file;
  std::unique_ptr<ConnectionWriter> connection;
  int64_t start_ns = now_ns();
  std::mutex mutex;  // the session emits under its own lock; this one guards finish() against on_event
  bool finished = false;

  std::mutex queue_mutex;
  std::condition_variable wake;     // the encoder: events queued, a flush asked for, stopping
  std::condition_variable drained;  // flush() and a full queue: the encoder took and encoded a batch
  std::deque<Pending> queue;
  size_t encoding = 0;              // events the encoder has taken and not yet handed on
  bool idle = false, flushing = false, stopping = false;
  std::atomic<uint64_t> queued{0}, handed_on{0};  // counts, for flush_on_crash (which takes no lock)
  std::thread thread;

  void start() {
    watch_for_fork();
    try {
      thread = std::thread([this] { loop(); });
    } catch (const std::system_error&) {  // encoded on the engine's thread instead
    }
  }

  // Encodes one event and hands its records to the connection and the file.
  void hand_on(const Pending& p) {
    std::vector<Blob> blobs;
    EncodedEvent e = encoder.encode(p.seq, p.time_ns, p.event, blobs);
    if (connection) {
      const bool boundary = e.kind == EventKind::Launch || e.kind == EventKind::Output;
      std::string bytes;
      for (const Blob& b : blobs) bytes += frame_bytes('B', blob_frame_body(b));
      bytes += frame_bytes('E', event_frame_body(e));
      connection->post(bytes, boundary);
    }
    if (file) file->add(std::move(blobs), std::move(e));
    handed_on.fetch_add(1, std::memory_order_release);
  }

  void add(uint64_t seq, const Event& event) {  // the engine's thread, `mutex` held
    if (g_forked_child.load(std::memory_order_relaxed)) return;
    Pending p{seq, now_ns() - start_ns, event};
    if (!thread.joinable()) {
      queued.fetch_add(1, std::memory_order_relaxed);
      hand_on(p);
      return;
    }
    std::unique_lock<std::mutex> lock(queue_mutex);
    drained.wait(lock, [&] { return queue.size() < kMaxPending; });
    queue.push_back(std::move(p));
    queued.fetch_add(1, std::memory_order_relaxed);
    if (idle) {
      idle = false;
      lock.unlock();
      wake.notify_one();
    }
  }

  // Returns once every event queued so far is encoded and handed on (`flushing` cuts the batch delay).
  void drain() {
    if (!thread.joinable() || g_forked_child.load(std::memory_order_relaxed)) return;
    std::unique_lock<std::mutex> lock(queue_mutex);
    flushing = true;
    wake.notify_one();  // an encoder waiting out kBatchDelay
    drained.wait(lock, [&] { return queue.empty() && encoding == 0; });
    flushing = false;
  }

  void stop() {
    if (!thread.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(queue_mutex);
      stopping = true;
    }
    wake.notify_one();
    thread.join();
  }

  void loop() {
    std::unique_lock<std::mutex> lock(queue_mutex);
    while (true) {
      idle = true;
      wake.wait(lock, [&] { return stopping || !queue.empty(); });
      idle = false;
      if (queue.empty()) return;  // stopping, and everything handed on
      if (!stopping && !flushing && queue.size() < kMaxPending / 2)
        wake.wait_for(lock, kBatchDelay, [&] { return stopping || flushing || queue.size() >= kMaxPending / 2; });
      std::deque<Pending> batch;
      batch.swap(queue);
      encoding = batch.size();
      drained.notify_all();  // room in the queue
      lock.unlock();
      for (const Pending& p : batch) hand_on(p);
      batch.clear();  // the events' shared data released outside the lock
      lock.lock();
      encoding = 0;
      drained.notify_all();
    }
  }
};

EventStreamer::EventStreamer(const RunInfo& info, const std::string& record_path, int connection_fd)
    : impl_(std::make_unique<Impl>()) {
  if (!record_path.empty()) impl_->file = std::make_unique<RecordingWriter>(record_path, info);
  if (connection_fd >= 0) {
    impl_->connection = std::make_unique<ConnectionWriter>(connection_fd);
    impl_->connection->post(frame_bytes('I', run_info_to_json(info)), /*boundary=*/true);
  }
  impl_->start();
}

EventStreamer::~EventStreamer() { finish(RunInfo{}); }

void EventStreamer::on_event(uint64_t seq, const Event& event) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (impl_->finished) return;
  impl_->add(seq, event);
}

void EventStreamer::flush() {
  if (g_forked_child.load()) return;  // the parent's queued frames are the parent's to send
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->drain();
  if (impl_->connection) impl_->connection->flush();
}

void EventStreamer::flush_on_crash() noexcept {
  // not impl_->mutex: the dying thread may hold it in on_event; the queue has its own lock. The encoder
  // thread goes on while this thread handles the signal: give it at most 0.1 s to encode what is queued
  // (it cannot when the dying thread holds the queue's lock, or is the encoder itself).
  const timespec pause{0, 1'000'000};
  for (int attempt = 0; attempt < 100; attempt++) {
    if (impl_->handed_on.load(std::memory_order_acquire) >= impl_->queued.load(std::memory_order_relaxed)) break;
    if (impl_->thread.joinable() && impl_->thread.get_id() == std::this_thread::get_id()) break;
    nanosleep(&pause, nullptr);
  }
  if (ConnectionWriter* connection = impl_->connection.get()) connection->flush_on_crash();
}

void EventStreamer::finish(const RunInfo& end) {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  if (impl_->finished) return;
  impl_->finished = true;
  impl_->stop();  // encodes what is queued
  if (impl_->file) impl_->file->finish(end);
  if (impl_->connection) {
    if (!end.ended.empty()) impl_->connection->post(frame_bytes('X', run_info_to_json(end)), /*boundary=*/false);
    impl_->connection.reset();  // sends what is queued
  }
}

}  // namespace ts
