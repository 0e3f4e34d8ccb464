// HttpExecutor: runs http jobs as one HTTP request (cpp-httplib) per attempt.
//
// The request: job.http->method (POST or GET) to job.http->url (http:// or https://; https needs
// cpp-httplib built with OpenSSL, else the attempt fails saying so), with job.http->headers plus
// the run's headers, which win over job headers of the same name:
//   X-Gnomon-Job-Id, X-Gnomon-Run-Id, X-Gnomon-Scheduled-At, X-Gnomon-Fencing-Token,
//   X-Gnomon-Attempt, X-Gnomon-Node-Id, X-Gnomon-Shard-Index, X-Gnomon-Shard-Count,
//   X-Gnomon-Deadline, X-Gnomon-Checkpoint, traceparent.
// A header whose value is empty (no deadline, no checkpoint, no trace) is left out, and so is a
// checkpoint that cannot be a header value (it holds CR, LF or NUL); the POST body still carries
// every field. A POST body is a JSON object with the same fields:
//   {"job_id":…, "run_id":…, "scheduled_at":…, "fencing_token":N, "attempt":N, "node_id":…,
//    "shard_index":N, "shard_count":N, "deadline":…|null, "checkpoint":…|null, "traceparent":…}
//
// How an attempt ends: a 2xx response -> kSucceeded; another status -> kFailed with exit_code =
// the HTTP status; a transport error (refused, timeout, reset) -> kFailed naming it, exit_code
// unset. The response body is kept like process output: its last kMaxOutputBytes, streamed, so
// memory stays bounded. ctx.stop cancels the request (client.stop() and a shutdown of the socket
// from a std::stop_callback) -> kCancelled. Redirects are not followed.
//
// Timeouts: connect, read and write timeouts are the time left until ctx.deadline (wall clock,
// read from the Clock) or, without a deadline, `default_timeout`.
//
// Exceptions from cpp-httplib are caught here and become kFailed. Thread-safe: each Execute uses
// its own client. Holds no threads.
#ifndef GNOMON_HTTP_EXECUTOR_H_
#define GNOMON_HTTP_EXECUTOR_H_

#include <cstddef>

#include "gnomon/executor.h"
#include "gnomon/time.h"

namespace gnomon {

struct HttpExecutorOptions {
  // Connect/read/write timeout when the run has no deadline. Default 30 s.
  Duration default_timeout = std::chrono::seconds(30);
  // Bytes of the response body kept (the last ones). Default kMaxOutputBytes (64 KiB).
  size_t max_output_bytes = kMaxOutputBytes;
};

class HttpExecutor final : public Executor {
 public:
  // `clock` gives "now" to turn ctx.deadline into a timeout; not owned, must outlive this.
  explicit HttpExecutor(HttpExecutorOptions options = {}, Clock& clock = SystemClock::Get());

  // REQUIRES: job.http is set; otherwise kFailed with an error.
  ExecResult Execute(const JobSpec& job, const RunContext& ctx) override;

 private:
  const HttpExecutorOptions options_;
  Clock& clock_;
};

}  // namespace gnomon

#endif  // GNOMON_HTTP_EXECUTOR_H_
