// HttpExecutor: runs http jobs as one HTTP request per attempt, through gnomon's HTTP client
// (libcurl; TLS options and the egress rule of gnomon/net.h).
//
// The request: job.http->method (POST or GET) to job.http->url (http:// or https://, no user
// info), with job.http->headers plus the run's headers, which win over job headers of the same
// name:
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
// the HTTP status; a transport error (DNS, refused, TLS, timeout, reset, refused by the egress
// rule) -> kFailed naming it, exit_code unset. The response body is kept like process output:
// its last max_output_bytes, the rest read and dropped, so memory stays bounded. ctx.stop aborts
// the request within milliseconds -> kCancelled. Redirects are not followed (a 3xx fails).
//
// Egress: every connection is checked against options.egress, or options.egress_for(job), by the
// address connected to, so a host name resolving to a denied address is refused too; by default
// link-local addresses (169.254.0.0/16, fe80::/10: cloud metadata services) are refused. Proxies
// come from the environment (http_proxy, https_proxy, no_proxy; docs/operations.md, "HTTP
// client").
//
// Timeouts: with ctx.deadline, the whole request must end by it (wall clock, read from the
// Clock); without one, the request fails after `default_timeout` without a byte moving either
// way. Connecting takes at most `connect_timeout` in both cases.
//
// Thread-safe: many Execute calls may run at once (one libcurl transfer each). Holds no threads.
#ifndef GNOMON_HTTP_EXECUTOR_H_
#define GNOMON_HTTP_EXECUTOR_H_

#include <cstddef>
#include <functional>
#include <memory>

#include "gnomon/executor.h"
#include "gnomon/net.h"
#include "gnomon/time.h"

namespace gnomon {

namespace net {
class HttpClient;
}  // namespace net

struct HttpExecutorOptions {
  // When the run has no deadline: the request fails after this long without a byte moving
  // either way. Default 30 s.
  Duration default_timeout = std::chrono::seconds(30);
  // Longest wait for the connection (TCP and TLS handshake). Default 10 s.
  Duration connect_timeout = std::chrono::seconds(10);
  // Bytes of the response body kept (the last ones). Default kMaxOutputBytes (64 KiB).
  size_t max_output_bytes = kMaxOutputBytes;
  // TLS of https:// targets. Default: the system CAs, verification on, no client certificate.
  net::TlsOptions tls;
  // Addresses a request may connect to. Default net::EgressRule::Default(): link-local denied.
  net::EgressRule egress = net::EgressRule::Default();
  // When set, the rule of each job instead of `egress` (e.g. the egress rule of the policy of
  // its namespace). Called once per Execute, on the calling thread; must be thread-safe as
  // Execute is. Default empty: `egress` for every job.
  std::function<net::EgressRule(const JobSpec& job)> egress_for;
};

class HttpExecutor final : public Executor {
 public:
  // `clock` gives "now" to turn ctx.deadline into a timeout; not owned, must outlive this.
  explicit HttpExecutor(HttpExecutorOptions options = {}, Clock& clock = SystemClock::Get());
  ~HttpExecutor() override;

  // REQUIRES: job.http is set; otherwise kFailed with an error.
  ExecResult Execute(const JobSpec& job, const RunContext& ctx) override;

 private:
  const HttpExecutorOptions options_;
  Clock& clock_;
  std::unique_ptr<net::HttpClient> client_;
};

}  // namespace gnomon

#endif  // GNOMON_HTTP_EXECUTOR_H_
