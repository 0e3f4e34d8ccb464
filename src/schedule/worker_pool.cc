#include "src/schedule/worker_pool.h"

namespace gnomon::internal {

WorkerPool::WorkerPool(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
}

WorkerPool::~WorkerPool() { Shutdown(true); }

bool WorkerPool::Submit(std::function<void()> task, Lane lane, bool kept) {
  {
    MutexLock lock(mu_);
    if (closed_) return false;
    lanes_[static_cast<int>(lane)].push_back(Task{std::move(task), kept});
  }
  cv_.notify_one();
  return true;
}

void WorkerPool::Shutdown(bool drop_pending) {
  {
    MutexLock lock(mu_);
    closed_ = true;
    drop_ = drop_ || drop_pending;
  }
  cv_.notify_all();
  for (std::jthread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

int WorkerPool::busy() const {
  MutexLock lock(mu_);
  return busy_;
}

void WorkerPool::Work() {
  MutexLock lock(mu_);
  while (true) {
    std::deque<Task>* lane = nullptr;
    cv_.wait(lock.native(), [&] {
      mu_.AssertHeld();
      for (std::deque<Task>& l : lanes_) {
        if (!l.empty()) {
          lane = &l;
          return true;
        }
      }
      return closed_;
    });
    if (lane == nullptr) return;  // closed, and nothing is queued
    Task task = std::move(lane->front());
    lane->pop_front();
    if (drop_ && !task.kept) continue;
    ++busy_;
    lock.Unlock();
    task.run();
    task = {};  // its captures go outside the lock
    lock.Lock();
    --busy_;
  }
}

}  // namespace gnomon::internal
