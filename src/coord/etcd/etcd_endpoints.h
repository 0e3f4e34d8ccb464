// EtcdEndpoints: the members an EtcdClient talks to (internal to the etcd backend): the order to
// try them in (failover from the current one), a capped exponential backoff with jitter for
// failed ones, the probe that finds a recovered cluster while every member is backing off, a
// pool of idle keep-alive connections per member, and new connections (plain or TLS) with the
// configured timeouts. See include/gnomon/etcd_coordinator.h, "Connections".
//
// Endpoints are named by their index in EtcdClientOptions::endpoints.
//
// Thread safety: every method is safe to call from many threads at once (one mutex, held only
// inside each method and never while a request is in flight).
#ifndef GNOMON_SRC_COORD_ETCD_ETCD_ENDPOINTS_H_
#define GNOMON_SRC_COORD_ETCD_ETCD_ENDPOINTS_H_

#include <cstddef>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gnomon/time.h"

namespace httplib {
class Client;
}  // namespace httplib

namespace gnomon::coord {

struct EtcdClientOptions;

class EtcdEndpoints {
 public:
  // REQUIRES: `options` (endpoints, tls, timeouts, backoff, max_idle_connections) outlives this
  // object; it has at least one endpoint.
  explicit EtcdEndpoints(const EtcdClientOptions& options);
  ~EtcdEndpoints();
  EtcdEndpoints(const EtcdEndpoints&) = delete;
  EtcdEndpoints& operator=(const EtcdEndpoints&) = delete;

  // "host:port" of the endpoint calls go to first.
  std::string Current();
  // (host, port) of endpoint `ep`.
  std::pair<std::string, int> Address(size_t ep);
  // The order to try endpoints in for one call (current first, backing-off ones left out).
  // When every endpoint is backing off, one call at a time (at most one per 200 ms) probes the
  // endpoint due soonest, so a recovered cluster is found at once, not after the backoff.
  std::vector<size_t> Plan();
  // An idle connection to `ep`, or a new keep-alive one with `read_timeout`.
  std::unique_ptr<httplib::Client> Checkout(size_t ep, Duration read_timeout);
  // Returns a connection that answered to `ep`'s pool (dropped when the pool is full).
  void Checkin(size_t ep, std::unique_ptr<httplib::Client> client);
  // A new connection to `host`:`port` (https with the TLS options).
  std::unique_ptr<httplib::Client> NewClient(const std::string& host, int port,
                                             Duration read_timeout) const;
  // Why a request failed at the transport (`error`: an httplib::Error), naming TLS failures
  // plainly.
  std::string TransportError(const httplib::Client& client, int error) const;
  // `ep` failed: drops its idle connections, moves calls to the next endpoint and backs it off.
  // `sent`: when the failed request was sent; requests sent before the endpoint's previous
  // failure (in flight together) do not lengthen its backoff again.
  void MarkFailed(size_t ep, Duration sent);
  // `ep` answered: ends its backoff (and a probe of it).
  void MarkOk(size_t ep);

 private:
  struct Endpoint {
    std::string host;
    int port = 0;
    int failures = 0;
    Duration retry_at{0};   // SystemClock steady time before which the endpoint is skipped
    Duration failed_at{0};  // steady time of the last failure (in-flight ones count once)
    Duration probe_at{0};   // steady time the last probe of a backing-off endpoint was sent
    std::vector<std::unique_ptr<httplib::Client>> idle;
  };

  const EtcdClientOptions& options_;
  std::mutex mu_;  // guards everything below
  std::vector<Endpoint> endpoints_;
  size_t current_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_ETCD_ETCD_ENDPOINTS_H_
