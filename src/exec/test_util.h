// Internal to gnomon_exec's tests: a run context with every field set, and a recorder for
// checkpoints that tests can wait on.
#ifndef GNOMON_SRC_EXEC_TEST_UTIL_H_
#define GNOMON_SRC_EXEC_TEST_UTIL_H_

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "gnomon/executor.h"
#include "gnomon/time.h"

namespace gnomon::exec_testing {

inline constexpr char kTraceparent[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

inline RunContext FullContext() {
  RunContext ctx;
  ctx.job_id = "job-1";
  ctx.run_id = "job-1@1795987800000#1";
  ctx.node_id = "node-a";
  ctx.scheduled_at = Instant::FromUnixMillis(1795987800000);  // 2026-11-29T21:30:00.000Z
  ctx.fencing_token = 42;
  ctx.attempt = 2;
  ctx.shard_index = 1;
  ctx.shard_count = 3;
  ctx.deadline = Instant::FromUnixMillis(1795987860250);  // 2026-11-29T21:31:00.250Z
  ctx.checkpoint = "cp-7";
  ctx.traceparent = kTraceparent;
  ctx.params = R"({"month":"2026-11","dry_run":true})";
  return ctx;
}

// Collects saved checkpoints; Wait blocks (on the system clock, bounded) until `n` were saved.
class CheckpointRecorder {
 public:
  // Installs the recorder as ctx.save_checkpoint. The recorder must outlive the run.
  void Attach(RunContext& ctx) {
    ctx.save_checkpoint = [this](const std::string& value) {
      std::lock_guard lock(mu_);
      values_.push_back(value);
      if (on_save_) on_save_(value);
      cv_.notify_all();
      return Status::Ok();
    };
  }
  // Called (in the executing thread, under the recorder's lock) for each saved value.
  void OnSave(std::function<void(const std::string&)> f) {
    std::lock_guard lock(mu_);
    on_save_ = std::move(f);
  }
  bool Wait(size_t n, Duration limit = std::chrono::seconds(20)) {
    std::unique_lock lock(mu_);
    return SystemClock::Get().WaitFor(lock, cv_, limit, [&] { return values_.size() >= n; });
  }
  std::vector<std::string> values() const {
    std::lock_guard lock(mu_);
    return values_;
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::string> values_;
  std::function<void(const std::string&)> on_save_;
};

}  // namespace gnomon::exec_testing

#endif  // GNOMON_SRC_EXEC_TEST_UTIL_H_
