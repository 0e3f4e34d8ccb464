#include "src/coord/etcd/etcd_endpoints.h"

#include <httplib.h>
#include <openssl/x509.h>

#include <algorithm>
#include <ctime>

#include "src/coord/etcd/etcd_client.h"

namespace gnomon::coord {
namespace {

// When every endpoint is backing off, a probe goes to one of them at most this often.
constexpr Duration kProbeSpacing = std::chrono::milliseconds(200);

Duration SteadyNow() { return SystemClock::Get().SteadyNow(); }

void SetTimeouts(httplib::Client& client, Duration connect, Duration read) {
  auto split = [](Duration d) {
    const int64_t us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
    return std::pair<time_t, time_t>(us / 1000000, us % 1000000);
  };
  auto [cs, cus] = split(connect);
  auto [rs, rus] = split(read);
  client.set_connection_timeout(cs, cus);
  client.set_read_timeout(rs, rus);
  client.set_write_timeout(rs, rus);
}

}  // namespace

EtcdEndpoints::EtcdEndpoints(const EtcdClientOptions& options)
    : options_(options), rng_(std::random_device{}()) {
  for (const auto& [host, port] : options_.endpoints) {
    Endpoint ep;
    ep.host = host;
    ep.port = port;
    endpoints_.push_back(std::move(ep));
  }
}

EtcdEndpoints::~EtcdEndpoints() = default;

std::pair<std::string, int> EtcdEndpoints::Address(size_t ep) {
  std::lock_guard<std::mutex> lock(mu_);
  return {endpoints_[ep].host, endpoints_[ep].port};
}

std::string EtcdEndpoints::Current() {
  std::lock_guard<std::mutex> lock(mu_);
  if (endpoints_.empty()) return "";
  return endpoints_[current_].host + ":" + std::to_string(endpoints_[current_].port);
}

std::vector<size_t> EtcdEndpoints::Plan() {
  std::lock_guard<std::mutex> lock(mu_);
  const Duration now = SteadyNow();
  std::vector<size_t> plan;
  for (size_t i = 0; i < endpoints_.size(); ++i) {
    const size_t ep = (current_ + i) % endpoints_.size();
    if (endpoints_[ep].retry_at <= now) plan.push_back(ep);
  }
  if (!plan.empty()) return plan;
  // Every endpoint is backing off. Failing every call until the backoff ends would hide a
  // recovered cluster for up to reconnect_backoff_max (the backoff grows during an outage), so
  // one call probes the endpoint due soonest. A probe of a dead endpoint costs a refused
  // connection or one timeout of the one caller that sent it; the others fail at once.
  size_t best = endpoints_.size();
  for (size_t ep = 0; ep < endpoints_.size(); ++ep) {
    const Endpoint& e = endpoints_[ep];
    // A probe ends with MarkOk (probe_at = 0) or MarkFailed (failed_at = now); one that never
    // reports (a watch) counts as in flight for one request's timeouts at most.
    const bool in_flight = e.probe_at > e.failed_at &&
                           now - e.probe_at < options_.connect_timeout + options_.io_timeout;
    if (in_flight || now - e.probe_at < kProbeSpacing) continue;
    if (best == endpoints_.size() || e.retry_at < endpoints_[best].retry_at) best = ep;
  }
  if (best != endpoints_.size()) {
    endpoints_[best].probe_at = now;
    plan.push_back(best);
  }
  return plan;
}

std::unique_ptr<httplib::Client> EtcdEndpoints::Checkout(size_t ep, Duration read_timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  Endpoint& e = endpoints_[ep];
  if (!e.idle.empty()) {
    std::unique_ptr<httplib::Client> c = std::move(e.idle.back());
    e.idle.pop_back();
    return c;
  }
  auto c = NewClient(e.host, e.port, read_timeout);
  c->set_keep_alive(true);
  return c;
}

std::unique_ptr<httplib::Client> EtcdEndpoints::NewClient(const std::string& host, int port,
                                                          Duration read_timeout) const {
  const TlsOptions& tls = options_.tls;
  std::unique_ptr<httplib::Client> c;
  if (tls.enabled) {
    const std::string authority =
        host.find(':') != std::string::npos ? "[" + host + "]" : host;  // an IPv6 literal
    c = std::make_unique<httplib::Client>("https://" + authority + ":" + std::to_string(port),
                                          tls.cert_file, tls.key_file);
    if (!tls.ca_file.empty()) c->set_ca_cert_path(tls.ca_file);
    c->enable_server_certificate_verification(tls.verify);
  } else {
    c = std::make_unique<httplib::Client>(host, port);
  }
  c->set_tcp_nodelay(true);  // else Nagle + delayed ACK add ~40 ms to every request
  SetTimeouts(*c, options_.connect_timeout, read_timeout);
  return c;
}

std::string EtcdEndpoints::TransportError(const httplib::Client& client, int error) const {
  const auto err = static_cast<httplib::Error>(error);
  if (err == httplib::Error::SSLServerVerification) {
    const long v = client.get_openssl_verify_result();  // NOLINT(runtime/int): OpenSSL's type
    if (v != X509_V_OK) {
      return std::string("TLS: the server's certificate is not trusted: ") +
             X509_verify_cert_error_string(v) + " (tls_ca)";
    }
    return "TLS: the server's certificate does not name the host connected to";
  }
  if (err == httplib::Error::SSLConnection) {
    return "TLS: handshake failed (a plain-HTTP endpoint, a client certificate the server "
           "refused, or none where one is required: tls_cert/tls_key)";
  }
  if (err == httplib::Error::SSLLoadingCerts) {
    return "TLS: cannot load tls_ca, tls_cert or tls_key";
  }
  if ((err == httplib::Error::Read || err == httplib::Error::Write) && options_.tls.enabled) {
    // TLS 1.3 sends the server's verdict on the client certificate after the handshake.
    return httplib::to_string(err) +
           ": the connection ended (over TLS also: the member refused this client's certificate, "
           "or wants one: tls_cert/tls_key)";
  }
  return httplib::to_string(err);
}

void EtcdEndpoints::Checkin(size_t ep, std::unique_ptr<httplib::Client> client) {
  std::lock_guard<std::mutex> lock(mu_);
  Endpoint& e = endpoints_[ep];
  if (e.idle.size() < static_cast<size_t>(std::max(1, options_.max_idle_connections))) {
    e.idle.push_back(std::move(client));
  }
}

void EtcdEndpoints::MarkFailed(size_t ep, Duration sent) {
  std::lock_guard<std::mutex> lock(mu_);
  Endpoint& e = endpoints_[ep];
  e.idle.clear();  // their sockets may be dead too
  const Duration now = SteadyNow();
  if (current_ == ep) current_ = (ep + 1) % endpoints_.size();
  // Requests that were in flight together when the endpoint failed are one failure, not many
  // (a frozen member times out every connection at once).
  const bool again = sent < e.failed_at;
  e.failed_at = now;
  if (again) return;
  e.failures = std::min(e.failures + 1, 30);
  // Capped exponential backoff with jitter: a uniform wait in [cap/2, cap].
  Duration cap = options_.backoff_min;
  for (int i = 1; i < e.failures && cap < options_.backoff_max; ++i) cap *= 2;
  cap = std::min(cap, options_.backoff_max);
  const int64_t cap_ms = std::max<int64_t>(1, cap.count());
  std::uniform_int_distribution<int64_t> jitter(cap_ms / 2, cap_ms);
  e.retry_at = now + Duration(jitter(rng_));
}

void EtcdEndpoints::MarkOk(size_t ep) {
  std::lock_guard<std::mutex> lock(mu_);
  endpoints_[ep].failures = 0;
  endpoints_[ep].retry_at = Duration(0);
  endpoints_[ep].probe_at = Duration(0);
}

}  // namespace gnomon::coord
