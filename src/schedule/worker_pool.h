// WorkerPool: a fixed set of threads running submitted tasks in FIFO order. Bounded threads; the
// queue is not bounded (tasks are fires and housekeeping, bounded by the job set).
#ifndef GNOMON_SRC_SCHEDULE_WORKER_POOL_H_
#define GNOMON_SRC_SCHEDULE_WORKER_POOL_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gnomon::internal {

class WorkerPool {
 public:
  explicit WorkerPool(int threads);
  ~WorkerPool();  // Shutdown(true)

  // Queues `task`. Returns false (and drops it) after Shutdown. A `kept` task is run even by a
  // Shutdown that drops the pending ones (the end of something already under way).
  bool Submit(std::function<void()> task, bool kept = false);
  // Stops accepting tasks; drops queued ones (but the kept) when `drop_pending`, else runs them;
  // joins threads.
  void Shutdown(bool drop_pending);
  int busy() const;

 private:
  void Work();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  struct Task {
    std::function<void()> run;
    bool kept;
  };
  std::deque<Task> queue_;
  bool closed_ = false;
  bool drop_ = false;
  int busy_ = 0;
  std::vector<std::jthread> threads_;
};

}  // namespace gnomon::internal

#endif  // GNOMON_SRC_SCHEDULE_WORKER_POOL_H_
