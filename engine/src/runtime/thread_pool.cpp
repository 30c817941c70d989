#include "runtime/thread_pool.h"

#include <cstdlib>

namespace ts {

ThreadPool& ThreadPool::get() {
  static ThreadPool pool([] {
    const char* env = std::getenv("TENSORSCOPE_THREADS");
    int n = env ? std::atoi(env) : static_cast<int>(std::thread::hardware_concurrency());
    return n < 1 ? 1 : n;
  }());
  return pool;
}

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; i++) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

// Takes tasks until none is left; called with the lock held.
void ThreadPool::run_tasks() {
  while (next_ < n_) {
    int i = next_++;
    const auto* task = task_;
    mutex_.unlock();
    (*task)(i);
    mutex_.lock();
    if (++finished_ == n_) done_.notify_all();
  }
}

void ThreadPool::worker_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  uint64_t seen = 0;
  while (true) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    run_tasks();
  }
}

void ThreadPool::parallel_for(int n, const std::function<void(int)>& task) {
  if (n <= 1 || workers_.empty()) {
    for (int i = 0; i < n; i++) task(i);
    return;
  }
  std::unique_lock<std::mutex> lock(mutex_);
  task_ = &task;
  n_ = n;
  next_ = 0;
  finished_ = 0;
  generation_++;
  wake_.notify_all();
  run_tasks();
  done_.wait(lock, [&] { return finished_ == n_; });
  task_ = nullptr;
}

}  // namespace ts
