#include "src/schedule/worker_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gnomon::internal {
namespace {

using Lane = WorkerPool::Lane;

// One worker, held busy while tasks are queued in every lane, then released.
class OneWorker {
 public:
  OneWorker() : pool_(1) {
    pool_.Submit(
        [this] {
          std::unique_lock<std::mutex> lock(mu_);
          busy_ = true;
          cv_.notify_all();
          cv_.wait(lock, [&] { return released_; });
        },
        Lane::kRun);
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return busy_; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  std::function<void()> Record(const std::string& name) {
    return [this, name] {
      std::lock_guard<std::mutex> lock(mu_);
      order_.push_back(name);
    };
  }
  std::vector<std::string> order() {
    std::lock_guard<std::mutex> lock(mu_);
    return order_;
  }
  WorkerPool pool_;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool busy_ = false;
  bool released_ = false;
  std::vector<std::string> order_;
};

// Work under way (run lane) goes before housekeeping (control), which goes before new claims;
// FIFO within a lane.
TEST(WorkerPoolTest, TakesTheRunLaneFirstThenControlThenClaims) {
  OneWorker w;
  w.pool_.Submit(w.Record("claim-1"), Lane::kClaim);
  w.pool_.Submit(w.Record("control-1"), Lane::kControl);
  w.pool_.Submit(w.Record("run-1"), Lane::kRun);
  w.pool_.Submit(w.Record("claim-2"), Lane::kClaim);
  w.pool_.Submit(w.Record("run-2"), Lane::kRun);
  w.Release();
  w.pool_.Shutdown(/*drop_pending=*/false);
  EXPECT_EQ(w.order(),
            (std::vector<std::string>{"run-1", "run-2", "control-1", "claim-1", "claim-2"}));
}

// A dropping shutdown runs the kept tasks only, and refuses new ones.
TEST(WorkerPoolTest, ADroppingShutdownRunsOnlyTheKeptTasks) {
  OneWorker w;
  w.pool_.Submit(w.Record("claim"), Lane::kClaim);
  w.pool_.Submit(w.Record("report"), Lane::kRun, /*kept=*/true);
  w.pool_.Submit(w.Record("start"), Lane::kRun);
  std::thread stopper([&] { w.pool_.Shutdown(/*drop_pending=*/true); });
  while (w.pool_.Submit([] {}, Lane::kControl)) std::this_thread::yield();  // closed by now
  w.Release();
  stopper.join();
  EXPECT_EQ(w.order(), std::vector<std::string>{"report"});
}

// A pass asked for while one runs is neither run beside it nor lost: the running pass goes once
// more for any number of such requests.
TEST(OnePassAtATimeTest, ARequestDuringAPassMakesOneMorePassAfterIt) {
  OnePassAtATime passes;
  std::mutex mu;
  std::condition_variable cv;
  bool in_first = false, release = false;
  int started = 0, running = 0, most_at_once = 0;
  auto pass = [&] {
    std::unique_lock<std::mutex> lock(mu);
    most_at_once = std::max(most_at_once, ++running);
    if (++started == 1) {
      in_first = true;
      cv.notify_all();
      cv.wait(lock, [&] { return release; });
    }
    --running;
  };
  std::thread first([&] { passes.Run(pass); });
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return in_first; });
  }
  passes.Run(pass);  // during the first pass: returns at once, asks for one more
  passes.Run(pass);
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(started, 1);
    release = true;
  }
  cv.notify_all();
  first.join();
  EXPECT_EQ(started, 2) << "two requests during a pass make one more pass";
  EXPECT_EQ(most_at_once, 1);
  passes.Run(pass);  // idle again: runs now, on this thread
  EXPECT_EQ(started, 3);
}

}  // namespace
}  // namespace gnomon::internal
