// Test doubles for the engine (and embedders' tests): RecordingExecutor runs scripted attempts and
// remembers them; RecordingObserver remembers scheduler events. Both let a test wait (with a real
// timeout that only guards against hangs) until a condition on what they recorded holds.
// Thread-safe.
#ifndef GNOMON_TESTING_RECORDING_EXECUTOR_H_
#define GNOMON_TESTING_RECORDING_EXECUTOR_H_

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "gnomon/executor.h"
#include "gnomon/observer.h"

namespace gnomon::testing {

// What an attempt saw (RunContext without its stop token and callbacks).
struct RecordedAttempt {
  std::string job_id;
  std::string run_id;
  std::string node_id;
  Instant scheduled_at;
  int64_t fencing_token = 0;
  int attempt = 0;
  int shard_index = 0;
  int shard_count = 1;
  std::optional<Instant> deadline;
  std::optional<std::string> checkpoint;
  std::string traceparent;
  bool stopped = false;  // the stop token was requested before the attempt returned
  std::string params;
};

class RecordingExecutor final : public Executor {
 public:
  // Decides an attempt's result; may block (use WaitForStopOrRelease). Default: success.
  using Behavior = std::function<ExecResult(const JobSpec&, const RunContext&)>;

  void SetBehavior(Behavior b) {
    std::lock_guard<std::mutex> lock(mu_);
    behavior_ = std::move(b);
  }

  ExecResult Execute(const JobSpec& job, const RunContext& ctx) override {
    Behavior b;
    {
      std::lock_guard<std::mutex> lock(mu_);
      b = behavior_;
      ++started_;
    }
    cv_.notify_all();
    ExecResult r = b ? b(job, ctx) : ExecResult{};
    {
      std::lock_guard<std::mutex> lock(mu_);
      attempts_.push_back(RecordedAttempt{ctx.job_id, ctx.run_id, ctx.node_id, ctx.scheduled_at,
                                          ctx.fencing_token, ctx.attempt, ctx.shard_index,
                                          ctx.shard_count, ctx.deadline, ctx.checkpoint,
                                          ctx.traceparent, ctx.stop.stop_requested(), ctx.params});
    }
    cv_.notify_all();
    return r;
  }

  // Blocks the calling attempt until its stop token is requested or Release() was called (also
  // before the attempt started; Hold() re-arms). Returns true if stopped.
  bool WaitForStopOrRelease(const RunContext& ctx) {
    // The callback may run at once (stop already requested): register it before locking.
    std::stop_callback wake(ctx.stop, [this] {
      std::lock_guard<std::mutex> l(mu_);
      cv_.notify_all();
    });
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return ctx.stop.stop_requested() || released_; });
    return ctx.stop.stop_requested();
  }
  // Releases every attempt blocked in WaitForStopOrRelease, and later ones until Hold().
  void Release() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }
  void Hold() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = false;
  }

  std::vector<RecordedAttempt> attempts() const {
    std::lock_guard<std::mutex> lock(mu_);
    return attempts_;
  }
  int started() const {
    std::lock_guard<std::mutex> lock(mu_);
    return started_;
  }
  // Waits (real time, at most `timeout`) until at least `n` attempts finished / started.
  bool AwaitFinished(size_t n, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return attempts_.size() >= n; });
  }
  bool AwaitStarted(int n, std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return started_ >= n; });
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Behavior behavior_;
  std::vector<RecordedAttempt> attempts_;
  int started_ = 0;
  bool released_ = false;
};

class RecordingObserver final : public Observer {
 public:
  void OnEvent(const SchedulerEvent& event) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      events_.push_back(event);
    }
    cv_.notify_all();
  }
  std::vector<SchedulerEvent> events() const {
    std::lock_guard<std::mutex> lock(mu_);
    return events_;
  }
  int Count(SchedulerEvent::Kind kind, std::string_view detail = {}) const {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (const SchedulerEvent& e : events_) {
      if (e.kind == kind && (detail.empty() || e.detail == detail)) ++n;
    }
    return n;
  }
  // Waits (real time, at most `timeout`) until Count(kind, detail) >= n.
  bool Await(SchedulerEvent::Kind kind, int n, std::string_view detail = {},
             std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] {
      int c = 0;
      for (const SchedulerEvent& e : events_) {
        if (e.kind == kind && (detail.empty() || e.detail == detail)) ++c;
      }
      return c >= n;
    });
  }
  // Waits (real time, at most `timeout`) for an event of `kind` about run `run_id`.
  bool AwaitRun(SchedulerEvent::Kind kind, std::string_view run_id,
                std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] {
      return std::any_of(events_.begin(), events_.end(), [&](const SchedulerEvent& e) {
        return e.kind == kind && e.run_id == run_id;
      });
    });
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<SchedulerEvent> events_;
};

}  // namespace gnomon::testing

#endif  // GNOMON_TESTING_RECORDING_EXECUTOR_H_
