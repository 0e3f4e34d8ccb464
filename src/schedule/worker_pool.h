// WorkerPool: a fixed set of threads running submitted tasks, FIFO within each priority lane.
// Bounded threads; the queue is not bounded (tasks are fires and housekeeping, bounded by the job
// set).
#ifndef GNOMON_SRC_SCHEDULE_WORKER_POOL_H_
#define GNOMON_SRC_SCHEDULE_WORKER_POOL_H_

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "src/base/thread_annotations.h"

namespace gnomon::internal {

class WorkerPool {
 public:
  // Queues by priority: a free worker takes the oldest task of the first non-empty lane. Under
  // overload (more fires due than the backend can claim), work already under way must not wait
  // behind new claims: a claimed fire that does not start in time loses its lease, a node whose
  // heartbeat waits is taken for dead.
  enum class Lane {
    kRun,      // starts of claimed fires, final reports
    kControl,  // housekeeping (heartbeat, lost runs, pruning), pause-state refresh
    kClaim,    // new claims, takeover checks, misfire work
  };

  explicit WorkerPool(int threads);
  ~WorkerPool();  // Shutdown(true)

  // Queues `task` in `lane`. Returns false (and drops it) after Shutdown. A `kept` task is run
  // even by a Shutdown that drops the pending ones (the end of something already under way).
  bool Submit(std::function<void()> task, Lane lane, bool kept = false) GNOMON_EXCLUDES(mu_);
  // Stops accepting tasks; drops queued ones (but the kept) when `drop_pending`, else runs them;
  // joins threads.
  void Shutdown(bool drop_pending) GNOMON_EXCLUDES(mu_);
  int busy() const GNOMON_EXCLUDES(mu_);

 private:
  void Work() GNOMON_EXCLUDES(mu_);

  // A leaf: nothing is taken under it, and a task runs with it released.
  mutable Mutex mu_;
  std::condition_variable cv_;
  struct Task {
    std::function<void()> run;
    bool kept;
  };
  std::deque<Task> lanes_[3] GNOMON_GUARDED_BY(mu_);  // by Lane
  bool closed_ GNOMON_GUARDED_BY(mu_) = false;
  bool drop_ GNOMON_GUARDED_BY(mu_) = false;
  int busy_ GNOMON_GUARDED_BY(mu_) = 0;
  std::vector<std::jthread> threads_;
};

// Runs a periodic pass one at a time: a pass asked for while one runs is not run beside it nor
// dropped; the running pass goes once more when it ends (any number of requests meanwhile make
// one more pass). So a slow backend makes passes back to back, never overlapping, and a request
// made just after a pass began still gets a pass that starts after it.
class OnePassAtATime {
 public:
  template <class F>
  void Run(F pass) GNOMON_EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      if (running_) {
        again_ = true;
        return;
      }
      running_ = true;
    }
    while (true) {
      pass();
      MutexLock lock(mu_);
      if (!again_) {
        running_ = false;
        return;
      }
      again_ = false;
    }
  }

 private:
  Mutex mu_;
  bool running_ GNOMON_GUARDED_BY(mu_) = false;
  bool again_ GNOMON_GUARDED_BY(mu_) = false;
};

}  // namespace gnomon::internal

#endif  // GNOMON_SRC_SCHEDULE_WORKER_POOL_H_
