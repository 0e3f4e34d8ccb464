#include "src/coord/redis/redis_connection.h"

#include <hiredis/hiredis.h>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <random>
#include <string_view>

namespace gnomon::coord {
namespace {

RedisReply Copy(const redisReply* r) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::kString;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::kStatus;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = RedisReply::Type::kError;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::kInteger;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::kArray;
      out.elements.reserve(r->elements);
      for (size_t i = 0; i < r->elements; ++i) out.elements.push_back(Copy(r->element[i]));
      break;
    default:
      out.type = RedisReply::Type::kNil;
      break;
  }
  return out;
}

// Frees a hiredis reply at scope exit.
struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

struct ReaderDeleter {
  void operator()(redisReader* r) const { redisReaderFree(r); }
};
using ReaderPtr = std::unique_ptr<redisReader, ReaderDeleter>;

// What one read asks of the socket: hiredis' own buffer size.
constexpr size_t kReadChunk = 16 * 1024;

// The next reply parsed from what `sock` sends (`reader` keeps what came after it). Errors do not
// name the peer.
Result<ReplyPtr> ReadReply(RedisSocket& sock, redisReader* reader) {
  char buf[kReadChunk];
  while (true) {
    void* raw = nullptr;
    if (redisReaderGetReply(reader, &raw) != REDIS_OK) {
      return UnavailableError(std::string("protocol error: ") + reader->errstr);
    }
    if (raw != nullptr) return ReplyPtr(static_cast<redisReply*>(raw));
    Result<size_t> n = sock.Read(buf, sizeof buf);
    if (!n.ok()) return n.status();
    if (redisReaderFeed(reader, buf, *n) != REDIS_OK) {
      return UnavailableError(std::string("protocol error: ") + reader->errstr);
    }
  }
}

// Appends one argument of a command in RESP ("$<len>\r\n<bytes>\r\n"), as hiredis formats it:
// the scripts' long argument lists are formatted here into one buffer, rather than argument by
// argument into a growing sds (measured: a tenth of a busy node's CPU), and not copied first.
void AppendArg(std::string& out, std::string_view arg) {
  out += '$';
  out += std::to_string(arg.size());
  out += "\r\n";
  out.append(arg);
  out += "\r\n";
}

// A whole command: "*<argc>\r\n", then `head`'s arguments and each of `tails`' in order.
std::string FormatCommand(std::initializer_list<std::string_view> head,
                          std::initializer_list<const std::vector<std::string>*> tails) {
  size_t argc = head.size();
  size_t size = 16;
  for (std::string_view h : head) size += h.size() + 16;
  for (const std::vector<std::string>* t : tails) {
    argc += t->size();
    for (const std::string& a : *t) size += a.size() + 16;
  }
  std::string out;
  out.reserve(size);
  out += '*';
  out += std::to_string(argc);
  out += "\r\n";
  for (std::string_view h : head) AppendArg(out, h);
  for (const std::vector<std::string>* t : tails) {
    for (const std::string& a : *t) AppendArg(out, a);
  }
  return out;
}

}  // namespace

RedisConnection::RedisConnection(RedisConnectionConfig config)
    : config_(std::move(config)),
      address_(config_.host + ":" + std::to_string(config_.port)),
      rng_(std::random_device{}()) {}

RedisConnection::~RedisConnection() { DropLocked(); }

Result<std::unique_ptr<RedisConnection>> RedisConnection::Connect(RedisConnectionConfig config) {
  std::unique_ptr<RedisConnection> conn(new RedisConnection(std::move(config)));
  std::lock_guard<std::mutex> lock(conn->mu_);
  GNOMON_RETURN_IF_ERROR(conn->ConnectLocked());
  return conn;
}

std::string RedisConnection::Redact(std::string message) const {
  if (config_.password.empty()) return message;
  for (size_t pos = message.find(config_.password); pos != std::string::npos;
       pos = message.find(config_.password, pos + 3)) {
    message.replace(pos, config_.password.size(), "***");
  }
  return message;
}

void RedisConnection::DropLocked() {
  sock_.reset();
  if (reader_ != nullptr) redisReaderFree(reader_);
  reader_ = nullptr;
  subscribed_ = false;
  connected_.store(false);
}

Status RedisConnection::FailLocked(const std::string& why) {
  DropLocked();
  return UnavailableError("redis " + address_ + ": " + Redact(why));
}

bool RedisConnection::usable() const {
  return connected_.load() || SystemClock::Get().SteadyNow().count() >= retry_at_.load();
}

Status RedisConnection::DiscoverPrimaryLocked() {
  std::string last_error = "no sentinel configured";
  const std::string command =
      FormatCommand({"SENTINEL", "get-master-addr-by-name", config_.sentinel_master}, {});
  for (const auto& [host, port] : config_.sentinels) {
    const std::string where = "sentinel " + host + ":" + std::to_string(port);
    Result<std::unique_ptr<RedisSocket>> s = RedisSocket::Connect(
        host, port, config_.tls.get(), config_.connect_timeout, config_.io_timeout);
    if (!s.ok()) {
      last_error = where + ": " + Redact(s.status().message());
      continue;
    }
    ReaderPtr reader(redisReaderCreate());
    if (reader == nullptr) return InternalError("redis: out of memory");
    Status sent = (*s)->Write(command);
    Result<ReplyPtr> reply = sent.ok() ? ReadReply(**s, reader.get()) : Result<ReplyPtr>(sent);
    if (!reply.ok()) {
      last_error = where + ": " + Redact(reply.status().message());
      continue;
    }
    const redisReply* r = reply->get();
    if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
        r->element[0]->type == REDIS_REPLY_STRING && r->element[1]->type == REDIS_REPLY_STRING) {
      config_.host.assign(r->element[0]->str, r->element[0]->len);
      config_.port = std::atoi(r->element[1]->str);
      address_ = config_.host + ":" + std::to_string(config_.port);
      if (config_.port > 0) {
        if (config_.routes) config_.routes->PrimaryIs(address_);
        return Status::Ok();
      }
    }
    last_error = where + " does not know master \"" + config_.sentinel_master + "\"";
  }
  return UnavailableError("redis: no primary from the sentinels: " + last_error);
}

Status RedisConnection::ConnectLocked() {
  if (!config_.sentinels.empty()) GNOMON_RETURN_IF_ERROR(DiscoverPrimaryLocked());
  Result<std::unique_ptr<RedisSocket>> sock = RedisSocket::Connect(
      config_.host, config_.port, config_.tls.get(), config_.connect_timeout, config_.io_timeout);
  if (!sock.ok()) {
    return UnavailableError("redis " + address_ + ": " + Redact(sock.status().message()));
  }
  reader_ = redisReaderCreate();
  if (reader_ == nullptr) return InternalError("redis: out of memory");
  sock_ = std::move(*sock);
  connected_.store(true);
  auto setup = [&](const std::vector<std::string>& argv, const char* what) -> Status {
    Result<RedisReply> r = CommandLocked(argv);
    if (!r.ok()) return r.status();
    if (r->is_error()) return FailLocked(std::string(what) + " failed: " + r->str);
    return Status::Ok();
  };
  if (!config_.password.empty()) {
    std::vector<std::string> auth = {"AUTH"};
    if (!config_.user.empty()) auth.push_back(config_.user);
    auth.push_back(config_.password);
    GNOMON_RETURN_IF_ERROR(setup(auth, "AUTH"));
  }
  if (config_.db != 0) {
    GNOMON_RETURN_IF_ERROR(setup({"SELECT", std::to_string(config_.db)}, "SELECT"));
  }
  if (!config_.sentinels.empty()) {
    // Right after a failover a sentinel may still name the old primary: only a master will do.
    Result<RedisReply> role = CommandLocked({"ROLE"});
    if (!role.ok()) return role.status();
    if (role->type != RedisReply::Type::kArray || role->elements.empty() ||
        role->elements[0].str != "master") {
      return FailLocked("the sentinels' primary is not a master yet");
    }
  }
  backoff_ = Duration(0);
  return Status::Ok();
}

Status RedisConnection::EnsureConnectedLocked() {
  if (sock_ != nullptr) return Status::Ok();
  const Duration now = SystemClock::Get().SteadyNow();
  if (backoff_ > Duration(0) && now < next_attempt_) {
    return UnavailableError("redis " + address_ + ": disconnected; next reconnect attempt in " +
                            std::to_string((next_attempt_ - now).count()) + "ms");
  }
  Status s = ConnectLocked();
  if (!s.ok()) {
    backoff_ =
        backoff_ == Duration(0) ? config_.backoff_min : std::min(backoff_ * 2, config_.backoff_max);
    // Equal jitter: wait between half the backoff and the backoff.
    std::uniform_int_distribution<int64_t> jitter(backoff_.count() / 2, backoff_.count());
    next_attempt_ = SystemClock::Get().SteadyNow() + Duration(jitter(rng_));
    retry_at_.store(next_attempt_.count());
  }
  return s;
}

Result<RedisReply> RedisConnection::CommandLocked(const std::vector<std::string>& argv) {
  return FormattedCommandLocked(FormatCommand({}, {&argv}));
}

Result<RedisReply> RedisConnection::FormattedCommandLocked(const std::string& command) {
  GNOMON_RETURN_IF_ERROR(EnsureConnectedLocked());
  Status sent = sock_->Write(command);
  if (!sent.ok()) return FailLocked(sent.message());
  Result<ReplyPtr> reply = ReadReply(*sock_, reader_);
  if (!reply.ok()) return FailLocked(reply.status().message());
  return Copy(reply->get());
}

Result<RedisReply> RedisConnection::Command(const std::vector<std::string>& argv) {
  std::lock_guard<std::mutex> lock(mu_);
  return CommandLocked(argv);
}

Result<RedisReply> RedisConnection::CommandAsking(const std::vector<std::string>& argv) {
  std::lock_guard<std::mutex> lock(mu_);
  Result<RedisReply> asking = CommandLocked({"ASKING"});
  if (!asking.ok() || asking->is_error()) return asking;
  return CommandLocked(argv);
}

int RedisConnection::AddScript(std::string source) {
  std::lock_guard<std::mutex> lock(mu_);
  scripts_.push_back(std::make_unique<Script>(Script{std::move(source), ""}));
  return static_cast<int>(scripts_.size()) - 1;
}

Status RedisConnection::LoadScriptLocked(Script& script) {
  Result<RedisReply> r = CommandLocked({"SCRIPT", "LOAD", script.source});
  if (!r.ok()) return r.status();
  if (r->type != RedisReply::Type::kString) {
    return InternalError("redis " + address_ + ": SCRIPT LOAD failed: " + r->str);
  }
  script.sha = r->str;
  return Status::Ok();
}

Status RedisConnection::LoadScripts() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& script : scripts_) GNOMON_RETURN_IF_ERROR(LoadScriptLocked(*script));
  return Status::Ok();
}

Result<RedisReply> RedisConnection::Eval(int id, const std::vector<std::string>& keys,
                                         const std::vector<std::string>& args) {
  std::lock_guard<std::mutex> lock(mu_);
  return EvalLocked(id, keys, args);
}

Result<RedisReply> RedisConnection::EvalThen(int id, const std::vector<std::string>& keys,
                                             const std::vector<std::string>& args,
                                             const std::vector<std::string>& then,
                                             RedisReply& then_reply) {
  std::lock_guard<std::mutex> lock(mu_);
  Result<RedisReply> r = EvalLocked(id, keys, args);
  if (!r.ok() || r->is_error()) return r;
  return ThenLocked(std::move(r), then, then_reply);
}

Result<RedisReply> RedisConnection::ThenLocked(Result<RedisReply> r,
                                               const std::vector<std::string>& then,
                                               RedisReply& then_reply) {
  Result<RedisReply> after = CommandLocked(then);
  if (!after.ok()) return after.status();
  if (after->is_error()) {
    return UnavailableError("redis " + address_ + ": " + then.front() + ": " + Redact(after->str));
  }
  then_reply = std::move(*after);
  return r;
}

Result<RedisReply> RedisConnection::EvalRouted(int id, const std::vector<std::string>& keys,
                                               const std::vector<std::string>& args, bool asking,
                                               const std::vector<std::string>& then,
                                               RedisReply* then_reply) {
  std::lock_guard<std::mutex> lock(mu_);
  Result<RedisReply> r = EvalLocked(id, keys, args, asking, /*redirects=*/true);
  if (then.empty() || !r.ok() || r->is_error()) return r;
  GNOMON_CHECK(then_reply != nullptr);
  return ThenLocked(std::move(r), then, *then_reply);
}

Result<RedisReply> RedisConnection::EvalLocked(int id, const std::vector<std::string>& keys,
                                               const std::vector<std::string>& args, bool asking,
                                               bool redirects) {
  Script& script = *scripts_.at(static_cast<size_t>(id));
  if (script.sha.empty()) GNOMON_RETURN_IF_ERROR(LoadScriptLocked(script));
  // EVALSHA sha numkeys keys... args..., formatted straight from the caller's vectors.
  const std::string numkeys = std::to_string(keys.size());
  auto format = [&] { return FormatCommand({"EVALSHA", script.sha, numkeys}, {&keys, &args}); };
  std::string command = format();
  for (int tries = 0;; ++tries) {
    if (asking) {
      Result<RedisReply> a = CommandLocked({"ASKING"});
      if (!a.ok() || a->is_error()) return a;
    }
    Result<RedisReply> r = FormattedCommandLocked(command);
    if (!r.ok()) return r;
    if (!r->is_error()) return r;
    if (redirects) {
      for (const char* redirect : {"MOVED ", "ASK ", "TRYAGAIN", "CLUSTERDOWN"}) {
        if (r->str.starts_with(redirect)) return r;
      }
      // A cross-slot script that met a slot its server does not serve: the routing client's.
      if (r->is_non_local_key()) return r;
    }
    if (r->str.starts_with("NOSCRIPT") && tries == 0) {
      // The server forgot the script (restart, SCRIPT FLUSH, failover): load it and retry.
      GNOMON_RETURN_IF_ERROR(LoadScriptLocked(script));
      command = format();
      continue;
    }
    // A server that is loading, busy, read-only (a demoted primary) or down is transient.
    for (const char* transient : {"LOADING", "BUSY", "READONLY", "MASTERDOWN", "TRYAGAIN"}) {
      if (r->str.starts_with(transient)) {
        return UnavailableError("redis " + address_ + ": " + Redact(r->str));
      }
    }
    return InternalError("redis " + address_ + ": script error: " + Redact(r->str));
  }
}

}  // namespace gnomon::coord

namespace gnomon::coord {

Result<bool> RedisConnection::WaitMessage(const std::string& channel, Duration timeout,
                                          bool sharded) {
  std::lock_guard<std::mutex> lock(mu_);
  const std::string_view subscribe = sharded ? "ssubscribe" : "subscribe";
  const std::string_view message = sharded ? "smessage" : "message";
  if (!subscribed_) {
    Result<RedisReply> r = CommandLocked({sharded ? "SSUBSCRIBE" : "SUBSCRIBE", channel});
    if (!r.ok()) return r.status();
    if (r->type != RedisReply::Type::kArray || r->elements.empty() ||
        r->elements[0].str != subscribe) {
      return FailLocked(std::string(subscribe) + " " + channel + " was refused" +
                        (r->is_error() ? ": " + r->str : ""));
    }
    subscribed_ = true;
  }
  const Duration deadline = SystemClock::Get().SteadyNow() + timeout;
  bool got = false;
  char buf[kReadChunk];
  while (true) {
    // Replies already read into the reader first, then the socket.
    void* raw = nullptr;
    if (redisReaderGetReply(reader_, &raw) != REDIS_OK) {
      return FailLocked(std::string("protocol error: ") + reader_->errstr);
    }
    if (raw != nullptr) {
      ReplyPtr reply(static_cast<redisReply*>(raw));
      const bool push = reply->type == REDIS_REPLY_ARRAY && reply->elements >= 1 &&
                        reply->element[0]->str != nullptr;
      const std::string_view kind =
          push ? std::string_view(reply->element[0]->str, reply->element[0]->len) : "";
      if (kind == message) got = true;
      // The server dropped the sharded subscription: the channel's slot moved elsewhere.
      if (sharded && kind == "sunsubscribe") {
        return FailLocked("the server ended the subscription to " + channel + " (its slot moved)");
      }
      continue;
    }
    const Duration left = got ? Duration(0) : deadline - SystemClock::Get().SteadyNow();
    Result<size_t> n = sock_->ReadWithin(buf, sizeof buf, std::max(left, Duration(0)));
    if (!n.ok()) return FailLocked(n.status().message());
    if (*n == 0) return got;
    if (redisReaderFeed(reader_, buf, *n) != REDIS_OK) {
      return FailLocked(std::string("protocol error: ") + reader_->errstr);
    }
  }
}

// --- RedisConnectionPool ------------------------------------------------------------------------

Result<std::unique_ptr<RedisConnectionPool>> RedisConnectionPool::Connect(
    const RedisConnectionConfig& config, int size) {
  if (size < 1) return InvalidArgumentError("redis: the connection pool needs at least 1");
  std::vector<std::unique_ptr<RedisConnection>> conns;
  for (int i = 0; i < size; ++i) {
    Result<std::unique_ptr<RedisConnection>> c = RedisConnection::Connect(config);
    if (!c.ok()) return c.status();
    conns.push_back(std::move(*c));
  }
  return std::unique_ptr<RedisConnectionPool>(new RedisConnectionPool(std::move(conns)));
}

RedisConnectionPool::RedisConnectionPool(std::vector<std::unique_ptr<RedisConnection>> conns)
    : conns_(std::move(conns)), busy_(new std::atomic<int>[conns_.size()]) {
  for (size_t i = 0; i < conns_.size(); ++i) busy_[i].store(0);
}

size_t RedisConnectionPool::Acquire() {
  // An idle connection that is connected (or due to reconnect), else the least busy usable one:
  // after an outage the connections come back one by one (each with its own backoff), and a call
  // must not fail on one still waiting while another works.
  const size_t n = conns_.size();
  const size_t start = static_cast<size_t>(next_.fetch_add(1, std::memory_order_relaxed) % n);
  std::optional<size_t> best;
  int best_busy = 0;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (start + k) % n;
    if (!conns_[i]->usable()) continue;
    int idle = 0;
    if (busy_[i].compare_exchange_strong(idle, 1)) return i;
    if (!best || idle < best_busy) {
      best = i;
      best_busy = idle;
    }
  }
  const size_t i = best.value_or(start);  // none usable: fails fast, naming the backoff
  busy_[i].fetch_add(1);
  return i;
}

void RedisConnectionPool::Release(size_t i) { busy_[i].fetch_sub(1); }

Result<RedisReply> RedisConnectionPool::Command(const std::vector<std::string>& argv) {
  const size_t i = Acquire();
  Result<RedisReply> r = conns_[i]->Command(argv);
  Release(i);
  return r;
}

Result<RedisReply> RedisConnectionPool::CommandAsking(const std::vector<std::string>& argv) {
  const size_t i = Acquire();
  Result<RedisReply> r = conns_[i]->CommandAsking(argv);
  Release(i);
  return r;
}

int RedisConnectionPool::AddScript(const std::string& source) {
  int id = -1;
  for (auto& c : conns_) {
    const int got = c->AddScript(source);
    GNOMON_CHECK(id == -1 || got == id);
    id = got;
  }
  return id;
}

Result<RedisReply> RedisConnectionPool::Eval(int id, const std::vector<std::string>& keys,
                                             const std::vector<std::string>& args) {
  const size_t i = Acquire();
  Result<RedisReply> r = conns_[i]->Eval(id, keys, args);
  Release(i);
  return r;
}

Result<RedisReply> RedisConnectionPool::EvalThen(int id, const std::vector<std::string>& keys,
                                                 const std::vector<std::string>& args,
                                                 const std::vector<std::string>& then,
                                                 RedisReply& then_reply) {
  const size_t i = Acquire();
  Result<RedisReply> r = conns_[i]->EvalThen(id, keys, args, then, then_reply);
  Release(i);
  return r;
}

Result<RedisReply> RedisConnectionPool::EvalRouted(int id, const std::vector<std::string>& keys,
                                                   const std::vector<std::string>& args,
                                                   bool asking,
                                                   const std::vector<std::string>& then,
                                                   RedisReply* then_reply) {
  const size_t i = Acquire();
  Result<RedisReply> r = conns_[i]->EvalRouted(id, keys, args, asking, then, then_reply);
  Release(i);
  return r;
}

Status RedisConnectionPool::LoadScripts() {
  for (auto& c : conns_) GNOMON_RETURN_IF_ERROR(c->LoadScripts());
  return Status::Ok();
}

}  // namespace gnomon::coord
