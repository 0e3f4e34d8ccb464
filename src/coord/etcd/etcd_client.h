// EtcdClient: etcd's v3 JSON gateway over HTTP/1.1 (internal to the etcd backend). Calls with
// endpoint failover (the endpoints, their connection pools and backoff: EtcdEndpoints,
// etcd_endpoints.h), authentication tokens, watches, and the mapping of transport and gateway
// errors to Status. cpp-httplib and
// nlohmann-json exceptions stop here. See include/gnomon/etcd_coordinator.h, "Connections".
//
// Every response's HTTP Date header feeds a ServerClock (server_clock.h): ServerNow() estimates
// the answering member's wall clock, and CalibrateClock() sends probes timed to narrow it.
//
// Thread safety: every method is safe to call from many threads at once.
#ifndef GNOMON_SRC_COORD_ETCD_ETCD_CLIENT_H_
#define GNOMON_SRC_COORD_ETCD_ETCD_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gnomon/status.h"
#include "gnomon/time.h"
#include "gnomon/tls.h"
#include "src/coord/etcd/etcd_endpoints.h"
#include "src/coord/etcd/server_clock.h"

namespace gnomon::coord {

std::string Base64Encode(std::string_view in);
// InvalidArgument when `in` is not standard padded base64.
Result<std::string> Base64Decode(std::string_view in);

struct EtcdClientOptions {
  std::vector<std::pair<std::string, int>> endpoints;  // (host, port), at least one
  std::string user;                                    // empty = no authentication
  std::string password;
  TlsOptions tls;  // enabled: https to every endpoint
  Duration connect_timeout = std::chrono::seconds(2);
  Duration io_timeout = std::chrono::seconds(2);
  Duration backoff_min = std::chrono::seconds(1);
  Duration backoff_max = std::chrono::seconds(32);
  int max_idle_connections = 8;
  // Called (outside any lock) when a response contradicted the server clock estimate, which
  // restarted from it (a clock was stepped): the owner recalibrates. May be empty.
  std::function<void()> on_clock_reset;
};

class EtcdClient {
 public:
  explicit EtcdClient(EtcdClientOptions options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // POSTs `body` to `path` ("/v3/kv/txn", ...) and returns the parsed response. Errors:
  // Unavailable (no endpoint reachable, timeouts, no leader, quota), InvalidArgument (the
  // gateway refused the request), Internal (a malformed response).
  // `maybe_applied` (when not null) is set when the call failed but the request may still have
  // been applied, now or later (it was sent and no answer came: a timeout, a broken connection,
  // or a server that was frozen and resumes).
  Result<nlohmann::json> Call(std::string_view path, const nlohmann::json& body,
                              bool* maybe_applied = nullptr);

  // Opens /v3/watch with `create_request` and calls `on_message` with each streamed message
  // (the "result" object) until it returns false or no data came for `timeout`. Ok in both
  // cases; Unavailable when no endpoint accepted the stream.
  Status Watch(const nlohmann::json& create_request, Duration timeout,
               const std::function<bool(const nlohmann::json&)>& on_message);

  // "host:port" of the endpoint calls go to first (for messages and tests).
  std::string current_endpoint();

  // The server's wall clock now, estimated from the Date headers seen so far; nullopt before the
  // first response.
  std::optional<ServerClock::Reading> ServerNow();
  // The steady time (SystemClock) at which the estimate's uncertainty will exceed `limit`.
  Duration ClockStaleAt(Duration limit);
  // The half-width the estimate calibrates to (ServerClock::Target()).
  Duration ClockTarget();
  // Sends `probe` (a cheap request to `path`) at the moments ServerClock::NextProbe picks until
  // the estimate is calibrated, `budget` (monotonic) is spent or `stop` is requested. Ok in
  // those cases; a failed probe's status otherwise.
  Status CalibrateClock(std::string_view path, const nlohmann::json& probe, Duration budget,
                        std::stop_token stop);

 private:
  // The auth token (authenticating when there is none); "" without a user.
  Result<std::string> Token(bool refresh);
  // One POST on endpoint `ep`. `fail_over` is set when the next endpoint may be tried at once
  // (connection refused, member unavailable). FailedPrecondition = the auth token was refused.
  // `maybe_applied` (when not null) is set when the request may have reached the server
  // although the call failed (a timeout or a broken connection after sending).
  Result<nlohmann::json> Post(size_t ep, std::string_view path, const std::string& body,
                              const std::string& token, bool& fail_over,
                              bool* maybe_applied = nullptr);
  // Feeds a response's Date header to clock_.
  void AddDateSample(Duration sent, Duration received, const std::string& date);

  const EtcdClientOptions options_;
  EtcdEndpoints endpoints_{options_};  // its own lock; never held with mu_
  std::mutex mu_;                      // guards everything below
  std::string token_;
  ServerClock clock_;
};

}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_ETCD_ETCD_CLIENT_H_
