#include "src/coord/etcd/etcd_client.h"

#include <httplib.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <condition_variable>
#include <ctime>
#include <optional>

namespace gnomon::coord {
namespace {

// Blocks SIGPIPE on this thread while it lives, and discards one raised meanwhile. OpenSSL writes
// to its socket with write(2): a member that closed the connection (a refused client
// certificate) would otherwise kill the host process, which may not ignore SIGPIPE.
class ScopedNoSigpipe {
 public:
  ScopedNoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~ScopedNoSigpipe() {
    sigset_t pending;
    sigpending(&pending);
    if (!was_pending_ && sigismember(&pending, SIGPIPE) == 1) {
      const timespec zero{0, 0};
      while (sigtimedwait(&pipe_, nullptr, &zero) == -1 && errno == EINTR) {
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  ScopedNoSigpipe(const ScopedNoSigpipe&) = delete;
  ScopedNoSigpipe& operator=(const ScopedNoSigpipe&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
  bool was_pending_ = false;
};

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// gRPC status codes the gateway reports in "code".
constexpr int kGrpcInvalidArgument = 3;
constexpr int kGrpcDeadlineExceeded = 4;
constexpr int kGrpcResourceExhausted = 8;
constexpr int kGrpcUnavailable = 14;
constexpr int kGrpcUnauthenticated = 16;

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

std::string Base64Encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (static_cast<uint8_t>(in[i]) << 16) |
                       (static_cast<uint8_t>(in[i + 1]) << 8) | static_cast<uint8_t>(in[i + 2]);
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += kB64[(v >> 6) & 63];
    out += kB64[v & 63];
  }
  if (i + 1 == in.size()) {
    const uint32_t v = static_cast<uint8_t>(in[i]) << 16;
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    const uint32_t v = (static_cast<uint8_t>(in[i]) << 16) | (static_cast<uint8_t>(in[i + 1]) << 8);
    out += kB64[(v >> 18) & 63];
    out += kB64[(v >> 12) & 63];
    out += kB64[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

Result<std::string> Base64Decode(std::string_view in) {
  static const std::array<int, 256> kValue = [] {
    std::array<int, 256> t{};
    t.fill(-1);
    for (int i = 0; i < 64; ++i) t[static_cast<uint8_t>(kB64[i])] = i;
    return t;
  }();
  if (in.size() % 4 != 0) return InvalidArgumentError("base64: length is not a multiple of 4");
  std::string out;
  out.reserve(in.size() / 4 * 3);
  for (size_t i = 0; i < in.size(); i += 4) {
    int v[4];
    int pad = 0;
    for (int k = 0; k < 4; ++k) {
      const char c = in[i + k];
      if (c == '=' && i + 4 == in.size() && k >= 2) {
        v[k] = 0;
        ++pad;
      } else {
        if (pad > 0) return InvalidArgumentError("base64: data after padding");
        v[k] = kValue[static_cast<uint8_t>(c)];
        if (v[k] < 0) return InvalidArgumentError("base64: invalid character");
      }
    }
    const uint32_t n = (v[0] << 18) | (v[1] << 12) | (v[2] << 6) | v[3];
    out += static_cast<char>((n >> 16) & 0xff);
    if (pad < 2) out += static_cast<char>((n >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(n & 0xff);
  }
  return out;
}

EtcdClient::EtcdClient(EtcdClientOptions options)
    : options_(std::move(options)), rng_(std::random_device{}()) {
  for (const auto& [host, port] : options_.endpoints) {
    Endpoint ep;
    ep.host = host;
    ep.port = port;
    endpoints_.push_back(std::move(ep));
  }
}

EtcdClient::~EtcdClient() = default;

std::string EtcdClient::current_endpoint() {
  std::lock_guard<std::mutex> lock(mu_);
  if (endpoints_.empty()) return "";
  return endpoints_[current_].host + ":" + std::to_string(endpoints_[current_].port);
}

std::vector<size_t> EtcdClient::Plan() {
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

std::unique_ptr<httplib::Client> EtcdClient::Checkout(size_t ep, Duration read_timeout) {
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

std::unique_ptr<httplib::Client> EtcdClient::NewClient(const std::string& host, int port,
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

std::string EtcdClient::TransportError(const httplib::Client& client, int error) const {
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

void EtcdClient::Checkin(size_t ep, std::unique_ptr<httplib::Client> client) {
  std::lock_guard<std::mutex> lock(mu_);
  Endpoint& e = endpoints_[ep];
  if (e.idle.size() < static_cast<size_t>(std::max(1, options_.max_idle_connections))) {
    e.idle.push_back(std::move(client));
  }
}

void EtcdClient::MarkFailed(size_t ep, Duration sent) {
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

void EtcdClient::MarkOk(size_t ep) {
  std::lock_guard<std::mutex> lock(mu_);
  endpoints_[ep].failures = 0;
  endpoints_[ep].retry_at = Duration(0);
  endpoints_[ep].probe_at = Duration(0);
}

void EtcdClient::AddDateSample(Duration sent, Duration received, const std::string& date) {
  std::optional<Instant> d = ParseHttpDate(date);
  if (!d) return;
  bool reset = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    reset = !clock_.Add(sent, received, *d);
  }
  if (reset && options_.on_clock_reset) options_.on_clock_reset();
}

std::optional<ServerClock::Reading> EtcdClient::ServerNow() {
  std::lock_guard<std::mutex> lock(mu_);
  return clock_.Read(SteadyNow());
}

Duration EtcdClient::ClockStaleAt(Duration limit) {
  std::lock_guard<std::mutex> lock(mu_);
  return clock_.WhenUncertaintyExceeds(limit);
}

Duration EtcdClient::ClockTarget() {
  std::lock_guard<std::mutex> lock(mu_);
  return clock_.Target();
}

Status EtcdClient::CalibrateClock(std::string_view path, const nlohmann::json& probe,
                                  Duration budget, std::stop_token stop) {
  const Duration deadline = SteadyNow() + budget;
  std::mutex mu;
  std::condition_variable cv;
  std::stop_callback wake(stop, [&] {
    std::lock_guard<std::mutex> lock(mu);
    cv.notify_all();
  });
  // At most 64 probes: two sweeps of 16 need ~34; the rest covers probes that came back slowly.
  for (int probes = 0; probes < 64 && !stop.stop_requested(); ++probes) {
    std::optional<Duration> at;
    {
      std::lock_guard<std::mutex> lock(mu_);
      at = clock_.NextProbe(SteadyNow());
    }
    if (!at || *at > deadline) return Status::Ok();
    {
      std::unique_lock<std::mutex> lock(mu);
      if (SystemClock::Get().WaitUntilSteady(lock, cv, *at,
                                             [&] { return stop.stop_requested(); })) {
        return Status::Ok();
      }
    }
    Result<nlohmann::json> r = Call(path, probe);
    if (!r.ok()) return r.status();
  }
  return Status::Ok();
}

Result<nlohmann::json> EtcdClient::Post(size_t ep, std::string_view path, const std::string& body,
                                        const std::string& token, bool& fail_over,
                                        bool* maybe_applied) {
  fail_over = false;
  std::string where;
  {
    std::lock_guard<std::mutex> lock(mu_);
    where = endpoints_[ep].host + ":" + std::to_string(endpoints_[ep].port);
  }
  std::unique_ptr<httplib::Client> client = Checkout(ep, options_.io_timeout);
  httplib::Headers headers;
  if (!token.empty()) headers.emplace("Authorization", token);
  const Duration sent = SteadyNow();
  std::optional<ScopedNoSigpipe> no_sigpipe;
  if (options_.tls.enabled) no_sigpipe.emplace();
  httplib::Result res = client->Post(std::string(path), headers, body, "application/json");
  no_sigpipe.reset();
  const Duration received = SteadyNow();
  if (!res) {
    const httplib::Error err = res.error();
    MarkFailed(ep, sent);
    // A refused connection costs nothing: try the next endpoint. A timeout already spent the
    // call's budget: report it, the next call starts at the next endpoint.
    // So does a failed TLS handshake (nothing was sent): another member may accept.
    fail_over = err == httplib::Error::Connection || err == httplib::Error::SSLConnection ||
                err == httplib::Error::SSLServerVerification;
    if (maybe_applied && !fail_over) *maybe_applied = true;
    return UnavailableError("etcd " + where + " " + std::string(path) + ": " +
                            TransportError(*client, static_cast<int>(err)));
  }
  AddDateSample(sent, received, res->get_header_value("Date"));
  nlohmann::json reply = nlohmann::json::parse(res->body, nullptr, false);
  if (res->status == 200 && !reply.is_discarded() && reply.is_object()) {
    Checkin(ep, std::move(client));
    MarkOk(ep);
    return reply;
  }
  Checkin(ep, std::move(client));
  int code = 0;
  std::string message = "HTTP " + std::to_string(res->status);
  if (!reply.is_discarded() && reply.is_object()) {
    if (reply.contains("code") && reply["code"].is_number_integer())
      code = reply["code"].get<int>();
    if (reply.contains("message") && reply["message"].is_string()) {
      message = reply["message"].get<std::string>();
    }
  }
  const std::string what = "etcd " + where + " " + std::string(path) + ": " + message;
  if (code == kGrpcUnauthenticated || message.find("auth token") != std::string::npos) {
    MarkOk(ep);
    return Status(StatusCode::kFailedPrecondition, what);  // Call refreshes the token
  }
  if (code == kGrpcUnavailable || code == kGrpcDeadlineExceeded) {
    // No leader, leader changed, request timed out, member stopping: another member may do.
    // ("request timed out" and "leader changed" may still be applied: the proposal can
    // commit after the answer.)
    MarkFailed(ep, sent);
    if (maybe_applied) *maybe_applied = true;
    fail_over = true;
    return UnavailableError(what);
  }
  MarkOk(ep);  // the member answers (and ends a probe)
  if (code == kGrpcResourceExhausted) return UnavailableError(what);  // quota: space exceeded
  if (code == kGrpcInvalidArgument) return InvalidArgumentError(what);
  return InternalError(what);
}

Result<std::string> EtcdClient::Token(bool refresh) {
  if (options_.user.empty()) return std::string();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!refresh && !token_.empty()) return token_;
  }
  nlohmann::json req = {{"name", options_.user}, {"password", options_.password}};
  std::string body;
  try {
    body = req.dump();
  } catch (const std::exception&) {
    return InvalidArgumentError("etcd: the user name or password is not valid UTF-8");
  }
  std::vector<size_t> plan = Plan();
  Status last = UnavailableError("etcd: every endpoint is backing off after failures");
  for (size_t ep : plan) {
    bool fail_over = false;
    Result<nlohmann::json> r = Post(ep, "/v3/auth/authenticate", body, "", fail_over);
    if (r.ok()) {
      if (!r->contains("token") || !(*r)["token"].is_string()) {
        return InternalError("etcd: authenticate answered no token");
      }
      std::lock_guard<std::mutex> lock(mu_);
      token_ = (*r)["token"].get<std::string>();
      return token_;
    }
    if (r.status().code() == StatusCode::kInvalidArgument ||
        r.status().code() == StatusCode::kFailedPrecondition) {
      // The message is etcd's ("authentication failed, invalid user ID or password"): it never
      // contains the password.
      return UnavailableError("etcd: authentication as user \"" + options_.user +
                              "\" failed: " + r.status().message());
    }
    last = r.status();
    if (!fail_over) break;
  }
  return last;
}

Result<nlohmann::json> EtcdClient::Call(std::string_view path, const nlohmann::json& body,
                                        bool* maybe_applied) {
  std::string text;
  try {
    text = body.dump();
  } catch (const std::exception& e) {
    return InternalError(std::string("etcd: cannot encode request: ") + e.what());
  }
  Result<std::string> token = Token(false);
  if (!token.ok()) return token.status();
  bool refreshed = false;
  std::vector<size_t> plan = Plan();
  if (plan.empty()) return UnavailableError("etcd: every endpoint is backing off after failures");
  Status last = UnavailableError("etcd: no endpoint");
  for (size_t i = 0; i < plan.size(); ++i) {
    bool fail_over = false;
    Result<nlohmann::json> r = Post(plan[i], path, text, *token, fail_over, maybe_applied);
    if (r.ok()) return r;
    if (r.status().code() == StatusCode::kFailedPrecondition && !options_.user.empty() &&
        !refreshed) {
      refreshed = true;
      token = Token(true);
      if (!token.ok()) return token.status();
      --i;  // the same endpoint again, with the new token
      continue;
    }
    if (!fail_over) return r.status();
    last = r.status();
  }
  return last;
}

Status EtcdClient::Watch(const nlohmann::json& create_request, Duration timeout,
                         const std::function<bool(const nlohmann::json&)>& on_message) {
  std::string body;
  try {
    body = nlohmann::json{{"create_request", create_request}}.dump();
  } catch (const std::exception& e) {
    return InternalError(std::string("etcd: cannot encode watch: ") + e.what());
  }
  Result<std::string> token = Token(false);
  if (!token.ok()) return token.status();
  std::vector<size_t> plan = Plan();
  if (plan.empty()) return UnavailableError("etcd: every endpoint is backing off after failures");
  for (size_t ep : plan) {
    std::string host;
    int port = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      host = endpoints_[ep].host;
      port = endpoints_[ep].port;
    }
    std::unique_ptr<httplib::Client> client_ptr = NewClient(host, port, timeout);
    httplib::Client& client = *client_ptr;
    httplib::Request req;
    req.method = "POST";
    req.path = "/v3/watch";
    req.body = body;
    req.set_header("Content-Type", "application/json");
    if (!token->empty()) req.set_header("Authorization", *token);
    std::string buffer;
    bool stopped = false;
    req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
      buffer.append(data, n);
      // The gateway streams one JSON message per line.
      size_t nl;
      while ((nl = buffer.find('\n')) != std::string::npos) {
        nlohmann::json msg = nlohmann::json::parse(buffer.substr(0, nl), nullptr, false);
        buffer.erase(0, nl + 1);
        if (msg.is_discarded() || !msg.is_object()) continue;
        if (!msg.contains("result") || !msg["result"].is_object()) {
          stopped = true;  // an error message: stop; the caller re-reads
          return false;
        }
        bool go_on = false;
        try {
          go_on = on_message(msg["result"]);
        } catch (const std::exception&) {
          go_on = false;
        }
        if (!go_on) {
          stopped = true;
          return false;
        }
      }
      return true;
    };
    httplib::Response res;
    httplib::Error err = httplib::Error::Success;
    {
      std::optional<ScopedNoSigpipe> no_sigpipe;
      if (options_.tls.enabled) no_sigpipe.emplace();
      client.send(req, res, err);
    }
    if (stopped || err == httplib::Error::Read || err == httplib::Error::Success) {
      return Status::Ok();  // stopped, timed out quietly, or the server ended the stream
    }
    if (err != httplib::Error::Connection) {
      return UnavailableError("etcd " + host + ":" + std::to_string(port) +
                              " /v3/watch: " + TransportError(client, static_cast<int>(err)));
    }
    MarkFailed(ep, SteadyNow());
  }
  return UnavailableError("etcd: no endpoint accepted the watch");
}

}  // namespace gnomon::coord
