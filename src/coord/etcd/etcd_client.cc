#include "src/coord/etcd/etcd_client.h"

#include <httplib.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <signal.h>

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

Duration SteadyNow() { return SystemClock::Get().SteadyNow(); }

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
EtcdClient::EtcdClient(EtcdClientOptions options) : options_(std::move(options)) {}

EtcdClient::~EtcdClient() = default;

std::string EtcdClient::current_endpoint() { return endpoints_.Current(); }

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
  const auto [host, port] = endpoints_.Address(ep);
  const std::string where = host + ":" + std::to_string(port);
  std::unique_ptr<httplib::Client> client = endpoints_.Checkout(ep, options_.io_timeout);
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
    endpoints_.MarkFailed(ep, sent);
    // A refused connection costs nothing: try the next endpoint. A timeout already spent the
    // call's budget: report it, the next call starts at the next endpoint.
    // So does a failed TLS handshake (nothing was sent): another member may accept.
    fail_over = err == httplib::Error::Connection || err == httplib::Error::SSLConnection ||
                err == httplib::Error::SSLServerVerification;
    if (maybe_applied && !fail_over) *maybe_applied = true;
    return UnavailableError("etcd " + where + " " + std::string(path) + ": " +
                            endpoints_.TransportError(*client, static_cast<int>(err)));
  }
  AddDateSample(sent, received, res->get_header_value("Date"));
  nlohmann::json reply = nlohmann::json::parse(res->body, nullptr, false);
  if (res->status == 200 && !reply.is_discarded() && reply.is_object()) {
    endpoints_.Checkin(ep, std::move(client));
    endpoints_.MarkOk(ep);
    return reply;
  }
  endpoints_.Checkin(ep, std::move(client));
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
    endpoints_.MarkOk(ep);
    return Status(StatusCode::kFailedPrecondition, what);  // Call refreshes the token
  }
  if (code == kGrpcUnavailable || code == kGrpcDeadlineExceeded) {
    // No leader, leader changed, request timed out, member stopping: another member may do.
    // ("request timed out" and "leader changed" may still be applied: the proposal can
    // commit after the answer.)
    endpoints_.MarkFailed(ep, sent);
    if (maybe_applied) *maybe_applied = true;
    fail_over = true;
    return UnavailableError(what);
  }
  endpoints_.MarkOk(ep);  // the member answers (and ends a probe)
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
  std::vector<size_t> plan = endpoints_.Plan();
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
  std::vector<size_t> plan = endpoints_.Plan();
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
  std::vector<size_t> plan = endpoints_.Plan();
  if (plan.empty()) return UnavailableError("etcd: every endpoint is backing off after failures");
  for (size_t ep : plan) {
    const auto [host, port] = endpoints_.Address(ep);
    std::unique_ptr<httplib::Client> client_ptr = endpoints_.NewClient(host, port, timeout);
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
      return UnavailableError("etcd " + host + ":" + std::to_string(port) + " /v3/watch: " +
                              endpoints_.TransportError(client, static_cast<int>(err)));
    }
    endpoints_.MarkFailed(ep, SteadyNow());
  }
  return UnavailableError("etcd: no endpoint accepted the watch");
}

}  // namespace gnomon::coord