#include "src/schedule/worker_pool.h"

namespace gnomon::internal {

WorkerPool::WorkerPool(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
}

WorkerPool::~WorkerPool() { Shutdown(true); }

bool WorkerPool::Submit(std::function<void()> task, bool kept) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return false;
    queue_.push_back(Task{std::move(task), kept});
  }
  cv_.notify_one();
  return true;
}

void WorkerPool::Shutdown(bool drop_pending) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    drop_ = drop_ || drop_pending;
  }
  cv_.notify_all();
  for (std::jthread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

int WorkerPool::busy() const {
  std::lock_guard<std::mutex> lock(mu_);
  return busy_;
}

void WorkerPool::Work() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return closed_ || !queue_.empty(); });
    if (queue_.empty()) {
      if (closed_) return;
      continue;
    }
    Task task = std::move(queue_.front());
    queue_.pop_front();
    if (drop_ && !task.kept) continue;
    ++busy_;
    lock.unlock();
    task.run();
    task = {};  // its captures go outside the lock
    lock.lock();
    --busy_;
  }
}

}  // namespace gnomon::internal
