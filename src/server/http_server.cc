// HttpServer over Boost.Beast and Boost.Asio (docs/architecture.md "The HTTP transport" says why
// Beast and not libmicrohttpd, with the measurements).
//
// Threads: `io_threads` I/O threads, each running its own io_context; an accepted connection is
// given to one of them (round robin), so a connection's handlers never run concurrently and need
// no strand. No I/O thread ever waits: a slow client costs a socket and a few kilobytes, not a
// thread. Requests are handed to a pool of `handler_threads` (HttpHandler::Handle may block on
// the backend); paths in `inline_paths` (cheap, never blocking: /healthz) are answered on the I/O
// thread, so a saturated pool cannot delay a liveness probe. The probe listener has its own
// connection allowance and its own two handler threads.
//
// The head of a request is read with raw reads fed to the parser, so that each read is armed
// with min(now + idle_timeout, head start + header_timeout): a client that trickles a byte a
// second is cut at header_timeout, one that says nothing at idle_timeout. The parser is never
// given more than max_header_bytes of one head (Beast's header_limit does not count a start line
// already consumed), and the read buffer is capped a little above it.
//
// TLS (tls_cert/tls_key; the context in http_tls_context.h): the same session over an OpenSSL
// stream, its handshake within header_timeout; with client_ca the handshake requires a client
// certificate those CAs signed, and the verified subject reaches the handler. The context is
// swapped whole on ReloadCertificates; a session keeps the one it started with.
#include "src/server/http_server.h"

// Boost 1.74's asio/awaitable.hpp uses std::exchange without including <utility> (GCC 12, C++20).
#include <utility>
// clang-format off
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/ssl.hpp>
// clang-format on
#include <openssl/ssl.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "src/server/api_util.h"
#include "src/server/http_api.h"
#include "src/server/http_tls_context.h"

namespace gnomon::server {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
namespace ssl = net::ssl;
using tcp = net::ip::tcp;
using PlainStream = beast::tcp_stream;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;
using SteadyTime = std::chrono::steady_clock::time_point;

// Connections the probe listener serves at once, in all and per client address.
constexpr int kProbeConnections = 64;
constexpr int kProbeConnectionsPerClient = 16;
// Handler threads of the probe listener.
constexpr int kProbeHandlerThreads = 2;

std::chrono::milliseconds Ms(Duration d) { return std::chrono::milliseconds(d.count()); }

// HttpServerOptions::handler_threads, 0 resolved.
int HandlerThreads(int configured) {
  if (configured > 0) return configured;
  return std::max(4, 2 * static_cast<int>(std::thread::hardware_concurrency()));
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Percent-decodes `in` ('+' is a space when `plus_is_space`); false when malformed.
bool Decode(std::string_view in, bool plus_is_space, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '%') {
      if (i + 2 >= in.size()) return false;
      const int hi = HexDigit(in[i + 1]), lo = HexDigit(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      *out += static_cast<char>(hi * 16 + lo);
      i += 2;
    } else {
      *out += plus_is_space && in[i] == '+' ? ' ' : in[i];
    }
  }
  return true;
}

// Splits a request target into its decoded path and query parameters; false when malformed.
bool ParseTarget(std::string_view target, Request* r) {
  const size_t q = target.find('?');
  if (!Decode(target.substr(0, q), false, &r->path)) return false;
  if (q == std::string_view::npos) return true;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    if (!pair.empty()) {
      const size_t eq = pair.find('=');
      std::string key, value;
      if (!Decode(pair.substr(0, eq), true, &key)) return false;
      if (eq != std::string_view::npos && !Decode(pair.substr(eq + 1), true, &value)) {
        return false;
      }
      r->params.emplace(std::move(key), std::move(value));
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return true;
}

// Open connections in all and per client address, for one listener.
class Admission {
 public:
  Admission(int max_total, int max_per_client)
      : max_total_(max_total), max_per_client_(max_per_client) {}
  bool Acquire(const net::ip::address& a) {
    std::lock_guard<std::mutex> lock(mu_);
    if (total_ >= max_total_) return false;
    int& n = per_client_[a];
    if (n >= max_per_client_) {
      if (n == 0) per_client_.erase(a);
      return false;
    }
    ++n;
    ++total_;
    return true;
  }
  void Release(const net::ip::address& a) {
    std::lock_guard<std::mutex> lock(mu_);
    --total_;
    if (--per_client_[a] <= 0) per_client_.erase(a);
  }

 private:
  const int max_total_;
  const int max_per_client_;
  std::mutex mu_;
  int total_ = 0;                               // guarded by mu_
  std::map<net::ip::address, int> per_client_;  // guarded by mu_
};

// Handler threads with a bound on the requests waiting for one. Lock-free on the request path:
// a request costs one hand-off to a handler thread and one back, nothing more.
class HandlerPool {
 public:
  HandlerPool(int threads, int max_queued)
      : pool_(std::make_unique<net::thread_pool>(static_cast<size_t>(std::max(1, threads)))),
        max_queued_(std::max(1, max_queued)) {}
  // Runs `task` on a handler thread; false (not run) when max_queued requests already wait or
  // the pool is stopping.
  template <typename F>
  bool Post(F task) {
    if (stopping_.load(std::memory_order_acquire)) return false;
    if (queued_.fetch_add(1, std::memory_order_relaxed) >= max_queued_) {
      queued_.fetch_sub(1, std::memory_order_relaxed);
      return false;
    }
    net::post(*pool_, [this, task = std::move(task)]() mutable {
      queued_.fetch_sub(1, std::memory_order_relaxed);
      task();
    });
    return true;
  }
  // Takes no more tasks and waits for those taken. A task posted by a request that raced with
  // the stop is not run; Discard drops it.
  void Stop() {
    stopping_.store(true, std::memory_order_release);
    pool_->join();
  }
  // Destroys tasks that were never run. REQUIRES: Stop(), and the I/O threads joined (nothing
  // posts any more); before the I/O contexts their sessions use are destroyed.
  void Discard() { pool_.reset(); }

 private:
  std::unique_ptr<net::thread_pool> pool_;
  const int max_queued_;
  std::atomic<int> queued_{0};
  std::atomic<bool> stopping_{false};
};

// What a session needs of its listener.
struct Lane {
  HttpHandler& handler;
  const HttpServerOptions& options;
  Admission& admission;
  HandlerPool& pool;
  bool probe;
  const TlsContexts* tls = nullptr;     // null: plain TCP
  std::atomic<int>* streams = nullptr;  // streamed answers open (HttpServerOptions::max_streams)
};

// An SSE comment sent on a stream quiet for this long: a vanished client fails the write.
constexpr auto kStreamKeepAlive = std::chrono::seconds(15);

using StringResponse = http::response<http::string_body>;

// One connection, over PlainStream or TlsStream. Lives as long as an operation on it holds a
// reference.
template <typename Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
  static constexpr bool kTls = std::is_same_v<Stream, TlsStream>;

 public:
  // `tls`: the context of a TlsStream (kept alive by the session), null for PlainStream.
  Session(tcp::socket socket, net::ip::address peer, const Lane& lane,
          std::shared_ptr<ssl::context> tls)
      : tls_(std::move(tls)),
        stream_(MakeStream(std::move(socket), tls_.get())),
        peer_(std::move(peer)),
        lane_(lane),
        buffer_(lane.options.max_header_bytes + 4096) {}
  ~Session() {
    lane_.admission.Release(peer_);
    if (events_ && lane_.streams != nullptr) lane_.streams->fetch_sub(1);
  }

  void Start() {
    net::dispatch(stream_.get_executor(), [self = this->shared_from_this()] { self->Handshake(); });
  }

 private:
  static Stream MakeStream(tcp::socket socket, ssl::context* tls) {
    if constexpr (kTls) {
      return Stream(std::move(socket), *tls);
    } else {
      return Stream(std::move(socket));
    }
  }

  const HttpServerOptions& options() const { return lane_.options; }
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  // The TLS handshake (within header_timeout), then the first request.
  void Handshake() {
    if constexpr (kTls) {
      Lowest().expires_after(Ms(options().header_timeout));
      stream_.async_handshake(
          ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
            if (ec) return self->Drop();
            self->handshake_done_ = true;
            self->client_subject_ = VerifiedPeerSubject(self->stream_.native_handle());
            self->BeginRequest();
          });
    } else {
      BeginRequest();
    }
  }

  void BeginRequest() {
    head_deadline_ = std::chrono::steady_clock::now() + Ms(options().header_timeout);
    head_used_ = 0;
    parser_.emplace();
    parser_->header_limit(static_cast<std::uint32_t>(options().max_header_bytes));
    parser_->body_limit(options().max_body_bytes);
    ParseHead();  // bytes of a pipelined request may already be buffered
  }

  void ReadHead() {
    const size_t room = buffer_.max_size() - buffer_.size();
    if (room == 0) return HeadTooLarge();
    Lowest().expires_at(
        std::min(std::chrono::steady_clock::now() + Ms(options().idle_timeout), head_deadline_));
    stream_.async_read_some(buffer_.prepare(std::min<size_t>(room, 8192)),
                            [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                              if (ec) return self->Close();  // timeout, end of stream, reset
                              self->buffer_.commit(n);
                              self->ParseHead();
                            });
  }

  void ParseHead() {
    if (buffer_.size() == 0) return ReadHead();
    beast::error_code ec;
    const size_t window = std::min(buffer_.size(), options().max_header_bytes - head_used_);
    const size_t used = parser_->put(net::buffer(buffer_.data().data(), window), ec);
    buffer_.consume(used);
    head_used_ += used;
    if (ec == http::error::need_more) {
      if (!parser_->is_header_done()) {
        return head_used_ + buffer_.size() >= options().max_header_bytes ? HeadTooLarge()
                                                                         : ReadHead();
      }
      ec = {};
    }
    if (ec == http::error::header_limit) return HeadTooLarge();
    if (ec == http::error::body_limit) return Refuse(BodyTooLarge());  // its Content-Length
    if (ec) return Refuse(Error(400, "bad_request", "malformed request: " + ec.message()));
    if (!parser_->is_header_done()) return ReadHead();
    OnHead();
  }

  void OnHead() {
    const auto& head = parser_->get();
    request_ = Request{};
    request_.method = std::string(head.method_string());
    const beast::string_view target = head.target();
    if (!ParseTarget(std::string_view(target.data(), target.size()), &request_)) {
      return Refuse(Error(400, "invalid_argument", "the request target is not valid"));
    }
    auto header = [&](http::field f) { return std::string(head[f]); };
    request_.authorization = header(http::field::authorization);
    request_.if_match = header(http::field::if_match);
    request_.if_none_match = header(http::field::if_none_match);
    request_.content_type = header(http::field::content_type);
    request_.origin = header(http::field::origin);
    request_.host = header(http::field::host);
    request_.sec_fetch_site = std::string(head["Sec-Fetch-Site"]);
    if (const auto n = parser_->content_length()) request_.content_length = *n;
    request_.chunked = parser_->chunked();
    request_.remote_address = peer_.to_string();
    request_.probe_lane = lane_.probe;
    request_.client_subject = client_subject_;
    keep_alive_ = head.keep_alive();
    head_ = request_.method == "HEAD";
    if (parser_->is_done()) return Dispatch();  // no body
    // A body follows: admitted (route, host, origin, type, token) before a byte of it is read.
    if (request_.content_length && *request_.content_length > options().max_body_bytes) {
      return Refuse(BodyTooLarge());
    }
    if (std::optional<Response> refused = lane_.handler.Admit(request_)) {
      return Refuse(std::move(*refused));
    }
    if (beast::iequals(head[http::field::expect], "100-continue")) {
      auto cont = std::make_shared<http::response<http::empty_body>>(http::status::continue_, 11);
      Lowest().expires_after(Ms(options().write_timeout));
      return http::async_write(
          stream_, *cont, [self = this->shared_from_this(), cont](beast::error_code ec, size_t) {
            if (ec) return self->Close();
            self->ReadBody();
          });
    }
    ReadBody();
  }

  void ReadBody() {
    Lowest().expires_after(Ms(options().body_timeout));
    http::async_read(stream_, buffer_, *parser_,
                     [self = this->shared_from_this()](beast::error_code ec, size_t) {
                       if (ec == http::error::body_limit) return self->Refuse(self->BodyTooLarge());
                       if (ec) return self->Close();
                       self->request_.body = std::move(self->parser_->get().body());
                       self->Dispatch();
                     });
  }

  // Runs the handler: inline for the cheap paths, else on the pool.
  void Dispatch() {
    const auto& inline_paths = options().inline_paths;
    if (std::find(inline_paths.begin(), inline_paths.end(), request_.path) != inline_paths.end()) {
      return Reply(lane_.handler.Handle(request_));
    }
    auto self = this->shared_from_this();
    const bool queued = lane_.pool.Post([self] {
      Response response = self->lane_.handler.Handle(self->request_);
      net::post(self->stream_.get_executor(), [self, response = std::move(response)]() mutable {
        self->Reply(std::move(response));
      });
    });
    if (!queued) {
      // Every handler thread is busy and max_queued_requests wait, or the server is stopping.
      Response busy = Error(503, "unavailable", "the server is busy: retry");
      busy.headers.emplace_back("Retry-After", "1");
      Reply(std::move(busy));
    }
  }

  Response BodyTooLarge() const {
    return Error(413, "payload_too_large",
                 "request body larger than " + std::to_string(options().max_body_bytes) + " bytes");
  }

  void HeadTooLarge() {
    head_ = false;
    Refuse(Error(431, "header_fields_too_large",
                 "request line and headers larger than " +
                     std::to_string(options().max_header_bytes) + " bytes"));
  }

  // Answers and closes: the rest of the connection's bytes are not read.
  void Refuse(Response response) {
    keep_alive_ = false;
    Reply(std::move(response));
  }

  void Reply(Response from) {
    if (from.stream) return StartStream(std::move(from));
    for (const auto& [k, v] : from.headers) {
      if (beast::iequals(k, "Connection") && beast::iequals(v, "close")) keep_alive_ = false;
    }
    auto res = std::make_shared<StringResponse>(static_cast<http::status>(from.status), 11);
    for (const auto& [k, v] : from.headers) {
      if (!beast::iequals(k, "Connection")) res->set(k, v);
    }
    const bool no_body = from.status == 204 || from.status == 304;
    if (!no_body) res->set(http::field::content_type, from.content_type);
    res->keep_alive(keep_alive_);
    if (!no_body) {
      res->content_length(from.body.size());
      if (!head_) res->body() = std::move(from.body);
    }
    Lowest().expires_after(Ms(options().write_timeout));
    auto done = [self = this->shared_from_this(), res](beast::error_code ec, size_t) {
      if (ec || !self->keep_alive_) return self->Close();
      self->BeginRequest();
    };
    if (head_ || no_body) {
      // The head only (HEAD keeps the Content-Length of the body it does not send).
      auto serializer = std::make_shared<http::response_serializer<http::string_body>>(*res);
      http::async_write_header(stream_, *serializer,
                               [done, serializer](beast::error_code ec, size_t n) { done(ec, n); });
    } else {
      http::async_write(stream_, *res, std::move(done));
    }
  }

  // A streamed answer: the head (chunked, the connection closes after it), then each piece Next
  // gives, until it ends, the client goes, or max_stream_duration passes.
  void StartStream(Response from) {
    if (lane_.streams == nullptr || head_ || lane_.streams->fetch_add(1) >= options().max_streams) {
      if (lane_.streams != nullptr && !head_) lane_.streams->fetch_sub(1);
      const char* why = head_                        ? "HEAD of an event stream: use GET"
                        : options().max_streams == 0 ? "event streams are turned off"
                                                     : "too many event streams are open: retry";
      Response busy = Error(503, "unavailable", why);
      if (head_) {
        busy.status = 405;
      } else {
        busy.headers.emplace_back("Retry-After", "5");
      }
      return Refuse(std::move(busy));
    }
    events_ = std::move(from.stream);
    keep_alive_ = false;
    stream_end_ = std::chrono::steady_clock::now() + Ms(options().max_stream_duration);
    last_write_ = std::chrono::steady_clock::now();
    auto res = std::make_shared<http::response<http::empty_body>>(
        static_cast<http::status>(from.status), 11);
    for (const auto& [k, v] : from.headers) {
      if (!beast::iequals(k, "Connection")) res->set(k, v);
    }
    res->set(http::field::content_type, "text/event-stream; charset=utf-8");
    res->set(http::field::cache_control, "no-store");
    res->keep_alive(false);
    res->chunked(true);
    auto serializer = std::make_shared<http::response_serializer<http::empty_body>>(*res);
    Lowest().expires_after(Ms(options().write_timeout));
    http::async_write_header(
        stream_, *serializer,
        [self = this->shared_from_this(), res, serializer](beast::error_code ec, size_t) {
          if (ec) return self->Close();
          self->NextEvents();
        });
  }

  // Asks the stream for its next piece on a handler thread; sends it back on this connection.
  void NextEvents() {
    auto self = this->shared_from_this();
    const bool queued = lane_.pool.Post([self] {
      auto piece = std::make_shared<std::string>();
      const bool more = self->events_->Next(piece.get());
      net::post(self->stream_.get_executor(),
                [self, piece, more] { self->SendEvents(std::move(piece), more); });
    });
    if (!queued) WaitForEvents();  // busy or stopping: try again after the interval
  }

  void SendEvents(std::shared_ptr<std::string> piece, bool more) {
    const auto now = std::chrono::steady_clock::now();
    const bool end = !more || now >= stream_end_;
    if (piece->empty() && !end && now - last_write_ < kStreamKeepAlive) return WaitForEvents();
    if (piece->empty() && !end) *piece = ": keep-alive\n\n";
    last_write_ = now;
    Lowest().expires_after(Ms(options().write_timeout));
    auto after = [self = this->shared_from_this(), piece, end](beast::error_code ec, size_t) {
      if (ec) return self->Close();
      if (!end) return self->WaitForEvents();
      static constexpr std::string_view kLastChunk = "0\r\n\r\n";
      self->Lowest().expires_after(Ms(self->options().write_timeout));
      net::async_write(self->stream_, net::buffer(kLastChunk.data(), kLastChunk.size()),
                       [self](beast::error_code, size_t) { self->Close(); });
    };
    if (piece->empty()) return after({}, 0);
    net::async_write(stream_, http::make_chunk(net::buffer(*piece)), std::move(after));
  }

  void WaitForEvents() {
    if (!timer_) timer_.emplace(stream_.get_executor());
    timer_->expires_after(events_->interval());
    timer_->async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (ec) return self->Close();
      self->NextEvents();
    });
  }

  // Ends the connection: TLS says close_notify first (waiting at most a second for the peer's).
  void Close() {
    if constexpr (kTls) {
      if (handshake_done_ && !closing_) {
        closing_ = true;
        Lowest().expires_after(std::chrono::seconds(1));
        return stream_.async_shutdown(
            [self = this->shared_from_this()](beast::error_code) { self->Drop(); });
      }
    }
    Drop();
  }

  void Drop() {
    beast::error_code ec;
    Lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
    Lowest().close();
  }

  const std::shared_ptr<ssl::context> tls_;  // before stream_, which uses it
  Stream stream_;
  bool handshake_done_ = false;
  bool closing_ = false;
  std::string client_subject_;  // of a verified client certificate
  const net::ip::address peer_;
  const Lane& lane_;
  beast::flat_buffer buffer_;  // its max_size caps what one head may buffer
  std::optional<http::request_parser<http::string_body>> parser_;
  SteadyTime head_deadline_;
  size_t head_used_ = 0;  // bytes of the current head the parser consumed
  Request request_;
  bool keep_alive_ = true;
  bool head_ = false;  // a HEAD request: the answer has no body
  // A streamed answer under way (StartStream).
  std::shared_ptr<EventStream> events_;
  std::optional<net::steady_timer> timer_;
  SteadyTime stream_end_;
  SteadyTime last_write_;
};

// Accepts connections on one address and hands them to the I/O contexts.
class Listener : public std::enable_shared_from_this<Listener> {
 public:
  Listener(net::io_context& accept_context, std::vector<std::unique_ptr<net::io_context>>& contexts,
           const Lane& lane)
      : contexts_(contexts), acceptor_(accept_context), retry_(accept_context), lane_(lane) {}

  // Binds and listens. Unavailable naming the address when it cannot be bound.
  Status Bind(const std::string& listen) {
    Result<std::pair<std::string, int>> addr = ParseListenAddress(listen);
    if (!addr.ok()) return addr.status();
    beast::error_code ec;
    const net::ip::address ip =
        net::ip::make_address(addr->first == "localhost" ? "127.0.0.1" : addr->first, ec);
    if (ec) {
      return InvalidArgumentError("listen: \"" + Shown(listen) + "\": \"" + Shown(addr->first) +
                                  "\" is not an IP address");
    }
    const tcp::endpoint endpoint(ip, static_cast<unsigned short>(addr->second));
    acceptor_.open(endpoint.protocol(), ec);
    // SO_REUSEADDR (a restart may bind while old connections linger) but never SO_REUSEPORT:
    // a second gnomon on the same port must fail, not share the requests.
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(endpoint, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) return UnavailableError("listen: cannot bind " + Shown(listen) + ": " + ec.message());
    port_ = acceptor_.local_endpoint().port();
    return Status::Ok();
  }
  int port() const { return port_; }

  void Accept() {
    net::io_context& context = *contexts_[next_++ % contexts_.size()];
    acceptor_.async_accept(context.get_executor(), [self = this->shared_from_this()](
                                                       beast::error_code ec, tcp::socket socket) {
      self->OnAccept(ec, std::move(socket));
    });
  }
  void Close() {
    net::post(acceptor_.get_executor(), [self = this->shared_from_this()] {
      beast::error_code ec;
      self->acceptor_.close(ec);
      self->retry_.cancel();
    });
  }

 private:
  void OnAccept(beast::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
    if (ec) {
      // Out of file descriptors (or another transient error): back off instead of spinning.
      retry_.expires_after(std::chrono::milliseconds(50));
      retry_.async_wait([self = this->shared_from_this()](beast::error_code e) {
        if (!e) self->Accept();
      });
      return;
    }
    beast::error_code peer_ec;
    const net::ip::address peer = socket.remote_endpoint(peer_ec).address();
    if (!peer_ec && lane_.admission.Acquire(peer)) {
      socket.set_option(tcp::no_delay(true), peer_ec);
      if (lane_.tls != nullptr) {
        std::make_shared<Session<TlsStream>>(std::move(socket), peer, lane_, lane_.tls->Current())
            ->Start();
      } else {
        std::make_shared<Session<PlainStream>>(std::move(socket), peer, lane_, nullptr)->Start();
      }
    } else {
      socket.close(peer_ec);  // over the limits: closed at once
    }
    Accept();
  }

  std::vector<std::unique_ptr<net::io_context>>& contexts_;
  size_t next_ = 0;
  tcp::acceptor acceptor_;
  net::steady_timer retry_;
  const Lane& lane_;
  int port_ = 0;
};

}  // namespace

class HttpServer::Impl {
 public:
  Impl(HttpHandler& handler, HttpServerOptions options)
      : handler_(handler),
        options_(std::move(options)),
        api_admission_(options_.max_connections, options_.max_connections_per_client),
        probe_admission_(kProbeConnections, kProbeConnectionsPerClient),
        api_pool_(HandlerThreads(options_.handler_threads), options_.max_queued_requests),
        probe_pool_(kProbeHandlerThreads, kProbeConnections),
        api_lane_{handler_, options_, api_admission_, api_pool_, false, nullptr, &streams_},
        probe_lane_{handler_, options_, probe_admission_, probe_pool_, true} {}

  Status Start();
  void Stop();

  HttpHandler& handler_;
  std::optional<TlsContexts> tls_;  // set by Start when tls_cert is
  const HttpServerOptions options_;
  Admission api_admission_;
  Admission probe_admission_;
  HandlerPool api_pool_;
  HandlerPool probe_pool_;
  std::atomic<int> streams_{0};  // open streamed answers of the API listener
  Lane api_lane_;
  const Lane probe_lane_;
  std::vector<std::unique_ptr<net::io_context>> contexts_;
  std::vector<net::executor_work_guard<net::io_context::executor_type>> guards_;
  std::shared_ptr<Listener> api_;
  std::shared_ptr<Listener> probe_;
  std::vector<std::jthread> threads_;
  bool started_ = false;
};

Status HttpServer::Impl::Start() {
  GNOMON_CHECK(!started_);
  if (options_.max_header_bytes < 256 || options_.max_body_bytes < 1 ||
      options_.max_connections < 1 || options_.max_connections_per_client < 1 ||
      options_.handler_threads < 0 || options_.io_threads < 1 || options_.max_streams < 0 ||
      options_.max_stream_duration <= Duration(0) || options_.header_timeout <= Duration(0) ||
      options_.idle_timeout <= Duration(0) || options_.body_timeout <= Duration(0) ||
      options_.write_timeout <= Duration(0)) {
    return InvalidArgumentError("http server: limits must be positive (max_header_bytes >= 256)");
  }
  if (options_.tls_cert.empty() != options_.tls_key.empty()) {
    return InvalidArgumentError("api: tls_cert and tls_key go together");
  }
  if (!options_.client_ca.empty() && options_.tls_cert.empty()) {
    return InvalidArgumentError("api: client_ca needs tls_cert and tls_key (mutual TLS)");
  }
  if (!options_.tls_cert.empty()) {
    Result<std::shared_ptr<ssl::context>> context = MakeTlsContext(options_);
    if (!context.ok()) return context.status();
    tls_.emplace(std::move(*context));
    api_lane_.tls = &*tls_;
  }
  for (int i = 0; i < options_.io_threads; ++i) {
    contexts_.push_back(std::make_unique<net::io_context>(1));
    guards_.push_back(net::make_work_guard(*contexts_.back()));
  }
  api_ = std::make_shared<Listener>(*contexts_[0], contexts_, api_lane_);
  Status s = api_->Bind(options_.listen);
  if (s.ok() && !options_.probe_listen.empty()) {
    probe_ = std::make_shared<Listener>(*contexts_[0], contexts_, probe_lane_);
    s = probe_->Bind(options_.probe_listen).WithPrefix("probe_listen");
  }
  if (!s.ok()) {
    api_.reset();
    probe_.reset();
    guards_.clear();
    contexts_.clear();
    return s;
  }
  api_->Accept();
  if (probe_) probe_->Accept();
  for (auto& context : contexts_) {
    net::io_context* c = context.get();
    threads_.emplace_back([c] { c->run(); });
  }
  started_ = true;
  return Status::Ok();
}

void HttpServer::Impl::Stop() {
  if (!started_) return;
  started_ = false;
  api_->Close();
  if (probe_) probe_->Close();
  // Requests being handled finish and are answered (later ones get 503); then the I/O stops and
  // every connection is dropped with its context.
  api_pool_.Stop();
  probe_pool_.Stop();
  for (auto& c : contexts_) c->stop();
  threads_.clear();  // joins
  api_pool_.Discard();
  probe_pool_.Discard();
  guards_.clear();
  api_.reset();
  probe_.reset();
  contexts_.clear();
}

HttpServer::HttpServer(HttpHandler& handler, HttpServerOptions options)
    : impl_(std::make_unique<Impl>(handler, std::move(options))) {}

HttpServer::~HttpServer() { Stop(); }

Status HttpServer::Start() { return impl_->Start(); }
void HttpServer::Stop() { impl_->Stop(); }
Status HttpServer::ReloadCertificates() {
  if (!impl_->tls_) return FailedPreconditionError("the API listener has no TLS");
  Result<std::shared_ptr<ssl::context>> context = MakeTlsContext(impl_->options_);
  if (!context.ok()) return context.status();
  impl_->tls_->Replace(std::move(*context));
  return Status::Ok();
}

int HttpServer::port() const { return impl_->api_ ? impl_->api_->port() : 0; }
int HttpServer::probe_port() const { return impl_->probe_ ? impl_->probe_->port() : 0; }

}  // namespace gnomon::server
