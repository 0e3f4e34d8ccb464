// Executor: runs one attempt of one fire and reports how it went. Implementations: in-process
// handlers (C++ callables), processes (fork/exec), HTTP requests. The scheduler calls Execute on a
// worker thread and cancels through the run context's stop token (timeout, lease lost, overlap
// replace, shutdown); Execute must return promptly after a stop is requested (processes: SIGTERM
// to the process group, SIGKILL after the job's kill_grace).
#ifndef GNOMON_EXECUTOR_H_
#define GNOMON_EXECUTOR_H_

#include <functional>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>

#include "gnomon/job.h"
#include "gnomon/status.h"
#include "gnomon/time.h"

namespace gnomon {

// What a run sees (docs/guarantees.md "What a run sees"). Valid for the duration of Execute.
struct RunContext {
  std::string job_id;
  std::string run_id;
  std::string node_id;
  Instant scheduled_at;
  int64_t fencing_token = 0;
  int attempt = 1;  // 1-based
  int shard_index = 0;
  int shard_count = 1;
  std::optional<Instant> deadline;        // wall-clock instant the timeout fires, if any
  std::optional<std::string> checkpoint;  // last saved value when the attempt started
  std::string traceparent;                // W3C trace context "00-<trace>-<span>-01"
  // The run's parameters: the job's default params merged with those of the trigger or re-run,
  // as a compact JSON object ("{}" when there are none).
  std::string params = "{}";
  std::stop_token stop;  // requested on cancellation

  // Saves a checkpoint value (fenced in the backend). Set by the scheduler; may be empty in
  // tests. Thread-safe.
  std::function<Status(const std::string&)> save_checkpoint;

  // Takes each piece of output as the attempt produces it (processes: stdout and stderr as they
  // are read; handlers: what they pass to Output). The scheduler keeps the last kMaxOutputBytes
  // and shows them while the attempt runs (Coordinator::SaveLiveOutput). May be empty in tests.
  // Thread-safe; returns at once.
  std::function<void(std::string_view)> on_output;

  // Convenience for handlers.
  Status Checkpoint(const std::string& value) const {
    return save_checkpoint ? save_checkpoint(value) : Status::Ok();
  }
  // Output shown while the attempt runs; when the handler's result carries no output, the
  // attempt's record keeps the last kMaxOutputBytes of it.
  void Output(std::string_view text) const {
    if (on_output) on_output(text);
  }
  bool stop_requested() const { return stop.stop_requested(); }
};

// How an attempt ended, as the executor saw it. The scheduler maps a stop it requested to
// kTimedOut / kCancelled.
struct ExecResult {
  RunOutcome outcome = RunOutcome::kSucceeded;  // kSucceeded, kFailed or kCancelled
  std::optional<int> exit_code;                 // process exit code / HTTP status
  std::string error;                            // why it failed, for people
  std::string output;                           // last kMaxOutputBytes of output / body
};

class Executor {
 public:
  virtual ~Executor() = default;
  // Runs the attempt to completion (blocking). Thread-safe: called from many workers at once.
  virtual ExecResult Execute(const JobSpec& job, const RunContext& ctx) = 0;
};

// An in-process job body. Return OK for success; an error Status fails the attempt with its
// message. Must watch ctx.stop and return when it is requested.
using Handler = std::function<Status(const RunContext& ctx)>;

// The environment variables of docs/guarantees.md for `ctx` (GNOMON_JOB_ID ... GNOMON_PARAMS);
// GNOMON_DEADLINE and GNOMON_CHECKPOINT are empty strings when unset.
std::vector<std::pair<std::string, std::string>> RunEnvironment(const RunContext& ctx);

}  // namespace gnomon

#endif  // GNOMON_EXECUTOR_H_
