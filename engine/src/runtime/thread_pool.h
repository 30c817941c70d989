// A fixed pool of worker threads for the CPU device's THREADS split: a kernel's outermost global
// loop is cut into one chunk per thread. Threads are created once (creating them per launch would cost
// more than small kernels run), and the calling thread runs a chunk itself.
//   TENSORSCOPE_THREADS: number of threads, default std::thread::hardware_concurrency().
#pragma once
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ts {

class ThreadPool {
 public:
  static ThreadPool& get();
  int size() const { return static_cast<int>(workers_.size()) + 1; }  // workers + the caller
  // Runs task(0) … task(n-1), spread over the pool, and returns when all are done. Not reentrant.
  void parallel_for(int n, const std::function<void(int)>& task);
  ~ThreadPool();

 private:
  explicit ThreadPool(int threads);
  void worker_loop();
  void run_tasks();
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(int)>* task_ = nullptr;
  int n_ = 0, next_ = 0, finished_ = 0;
  uint64_t generation_ = 0;
  bool stop_ = false;
};

}  // namespace ts
