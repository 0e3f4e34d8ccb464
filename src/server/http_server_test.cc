// The HTTP transport against real sockets: binding, routing to the handler, and each bound of
// docs/http-api.md "Limits" tried as an attacker would (header floods, slow clients, connection
// floods, oversized bodies, a saturated handler pool). Transport timeouts are real time by
// nature: the tests use short ones and assert with margins, never on exact timing.
#include "src/server/http_server.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gnomon::server {
namespace {

using std::chrono::milliseconds;
using std::chrono::steady_clock;
using ::testing::HasSubstr;

// Answers every request with its method, path and body; /block waits until released.
class EchoHandler final : public HttpHandler {
 public:
  std::optional<Response> Admit(const Request& r) override {
    ++admitted;
    if (r.path == "/refuse") return Response{403, "text/plain", "no", {}};
    return std::nullopt;
  }
  Response Handle(const Request& r) override {
    ++handled;
    if (r.path == "/block") {
      std::unique_lock<std::mutex> lock(mu_);
      ++blocked_;
      cv_.notify_all();
      cv_.wait(lock, [&] { return released_; });
    }
    Response out;
    out.content_type = "text/plain";
    out.body = r.method + " " + r.path + " " + r.body;
    for (const auto& [k, v] : r.params) out.body += " " + k + "=" + v;
    if (r.probe_lane) out.body += " probe";
    return out;
  }
  bool AwaitBlocked(int n) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::seconds(10), [&] { return blocked_ >= n; });
  }
  void Release() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  std::atomic<int> admitted{0};
  std::atomic<int> handled{0};

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int blocked_ = 0;
  bool released_ = false;
};

HttpServerOptions Loopback() {
  ::signal(SIGPIPE, SIG_IGN);  // clients write into connections the server closes
  HttpServerOptions o;
  o.listen = "127.0.0.1:0";
  return o;
}

// A raw TCP client; `source` binds the local address (another client address on loopback).
class Raw {
 public:
  explicit Raw(int port, const char* source = nullptr) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (source != nullptr) {
      sockaddr_in local{};
      local.sin_family = AF_INET;
      ::inet_pton(AF_INET, source, &local.sin_addr);
      ::bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof local);
    }
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0;
  }
  ~Raw() {
    if (fd_ >= 0) ::close(fd_);
  }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;
  Raw(Raw&& o) noexcept : fd_(std::exchange(o.fd_, -1)), connected_(o.connected_) {}

  bool connected() const { return connected_; }
  // Sends all of `data`; false when the peer closed (or reset) the connection.
  bool Send(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // Reads what arrives within `wait` (until the peer closes, or `want` bytes).
  std::string Read(milliseconds wait, size_t want = SIZE_MAX) {
    std::string out;
    const auto deadline = steady_clock::now() + wait;
    while (out.size() < want) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
      if (left.count() <= 0) break;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      out.append(buf, static_cast<size_t>(n));
    }
    return out;
  }
  // Reads one whole answer (head, and the body its Content-Length announces) or what arrives
  // within `wait`.
  std::string ReadResponse(milliseconds wait = milliseconds(5000)) {
    std::string out;
    const auto deadline = steady_clock::now() + wait;
    while (true) {
      const size_t end = out.find("\r\n\r\n");
      if (end != std::string::npos) {
        size_t length = 0;
        const size_t at = out.find("Content-Length: ");
        if (at != std::string::npos && at < end) length = std::stoul(out.substr(at + 16));
        if (out.size() >= end + 4 + length) return out;
      }
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - steady_clock::now());
      if (left.count() <= 0) return out;
      std::string more = Read(left, 1);
      if (more.empty()) return out;
      out += more;
    }
  }
  // Whether the peer closed the connection within `wait`.
  bool ClosedWithin(milliseconds wait) {
    Read(wait);
    return closed_;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool closed_ = false;
};

std::string Get(const std::string& path) {
  return "GET " + path + " HTTP/1.1\r\nHost: localhost\r\n\r\n";
}

// Answers a fresh GET within `within` (real time).
bool Answers(int port, milliseconds within = milliseconds(1000)) {
  Raw c(port);
  if (!c.connected() || !c.Send(Get("/healthz"))) return false;
  return c.ReadResponse(within).rfind("HTTP/1.1 200", 0) == 0;
}

TEST(HttpServerTest, ATakenPortIsAnError) {
  EchoHandler handler;
  HttpServer first(handler, Loopback());
  ASSERT_TRUE(first.Start().ok());
  HttpServerOptions second_options;
  second_options.listen = "127.0.0.1:" + std::to_string(first.port());
  HttpServer second(handler, second_options);
  const Status s = second.Start();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  HttpServerOptions bad;
  bad.listen = "no-such-name:0";
  HttpServer third(handler, bad);
  EXPECT_EQ(third.Start().code(), StatusCode::kInvalidArgument);
}

TEST(HttpServerTest, ServesTheHandler) {
  EchoHandler handler;
  HttpServer server(handler, Loopback());
  ASSERT_TRUE(server.Start().ok());
  httplib::Client c("127.0.0.1", server.port());
  Raw decoded(server.port());
  ASSERT_TRUE(decoded.Send(
      "POST /x/y%23z?a=1&b=two+words&c=%41 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"));
  EXPECT_THAT(decoded.ReadResponse(), HasSubstr("POST /x/y#z {} a=1 b=two words c=A"));
  // HEAD: the head of the answer only, with the body's length.
  auto head = c.Head("/x");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_EQ(head->get_header_value("Content-Length"),
            std::to_string(std::string("HEAD /x ").size()));
  EXPECT_TRUE(head->body.empty());
  // A body is admitted first: a refused one is never read (or handled).
  const int handled = handler.handled;
  EXPECT_EQ(c.Post("/refuse", "{}", "application/json")->status, 403);
  EXPECT_EQ(handler.handled, handled);
  // Pipelined requests on one connection are answered in order.
  Raw raw(server.port());
  ASSERT_TRUE(raw.Send(Get("/a") + Get("/b")));
  std::string both = raw.ReadResponse();
  both += raw.ReadResponse();
  EXPECT_LT(both.find("GET /a"), both.find("GET /b")) << both;
  // A malformed target is a 400.
  Raw bad(server.port());
  ASSERT_TRUE(bad.Send(Get("/%zz")));
  EXPECT_THAT(bad.ReadResponse(), HasSubstr("HTTP/1.1 400"));
  server.Stop();
  server.Stop();  // idempotent
}

// Header lines without end on one connection: answered 431 and closed after max_header_bytes,
// without buffering what follows; the server goes on serving.
TEST(HttpServerTest, AHeaderFloodIsCutAtTheLimit) {
  EchoHandler handler;
  HttpServer server(handler, Loopback());
  ASSERT_TRUE(server.Start().ok());
  for (const bool one_line : {false, true}) {
    Raw c(server.port());
    ASSERT_TRUE(c.Send("GET /healthz HTTP/1.1\r\nHost: localhost\r\n"));
    const std::string chunk = one_line ? std::string(64 * 1024, 'a') : [] {
      std::string lines;
      while (lines.size() < 64 * 1024) lines += "X-Flood: " + std::string(1000, 'b') + "\r\n";
      return lines;
    }();
    size_t sent = 0;
    // At most 100 MB; the server closes long before.
    while (sent < 100u * 1024 * 1024 && c.Send(chunk)) sent += chunk.size();
    EXPECT_LT(sent, 100u * 1024 * 1024) << "the server kept reading";
    EXPECT_THAT(c.Read(milliseconds(2000)), HasSubstr("431")) << one_line;
    EXPECT_TRUE(Answers(server.port()));
  }
  // A head of exactly the limit is fine; one byte more is not.
  HttpServerOptions o = Loopback();
  o.max_header_bytes = 1024;
  HttpServer small(handler, o);
  ASSERT_TRUE(small.Start().ok());
  const std::string start = "GET / HTTP/1.1\r\nHost: x\r\nX-Pad: ";
  const std::string fits = start + std::string(1024 - start.size() - 4, 'p') + "\r\n\r\n";
  ASSERT_EQ(fits.size(), 1024u);
  Raw ok(small.port());
  ASSERT_TRUE(ok.Send(fits));
  EXPECT_THAT(ok.ReadResponse(), HasSubstr("200"));
  const std::string over = start + std::string(1024 - start.size() - 3, 'p') + "\r\n\r\n";
  Raw too_big(small.port());
  ASSERT_TRUE(too_big.Send(over));
  EXPECT_THAT(too_big.Read(milliseconds(2000)), HasSubstr("431"));
}

// A client that trickles its head is cut at header_timeout however steadily it sends; one that
// sends nothing at idle_timeout.
TEST(HttpServerTest, HeadsHaveADeadline) {
  EchoHandler handler;
  HttpServerOptions o = Loopback();
  o.header_timeout = milliseconds(800);
  o.idle_timeout = milliseconds(400);
  HttpServer server(handler, o);
  ASSERT_TRUE(server.Start().ok());
  Raw trickle(server.port());
  ASSERT_TRUE(trickle.Send("GET / HTTP/1.1\r\n"));
  const auto start = steady_clock::now();
  bool open = true;
  while (open && steady_clock::now() - start < milliseconds(5000)) {
    open = trickle.Send("X") && !trickle.ClosedWithin(milliseconds(100));
  }
  const auto lasted = steady_clock::now() - start;
  EXPECT_FALSE(open);
  EXPECT_GE(lasted, milliseconds(700));
  EXPECT_LT(lasted, milliseconds(3000));
  Raw silent(server.port());
  EXPECT_TRUE(silent.ClosedWithin(milliseconds(3000)));
  // An idle keep-alive connection is closed too.
  Raw idle(server.port());
  ASSERT_TRUE(idle.Send(Get("/")));
  EXPECT_THAT(idle.ReadResponse(), HasSubstr("200"));
  EXPECT_TRUE(idle.ClosedWithin(milliseconds(3000)));
}

// 150 connections that each send a byte every 300 ms hold no thread: a fresh request is answered
// at once throughout.
TEST(HttpServerTest, SlowClientsDoNotStarveOthers) {
  EchoHandler handler;
  HttpServer server(handler, Loopback());
  ASSERT_TRUE(server.Start().ok());
  std::vector<Raw> slow;
  for (int i = 0; i < 150; ++i) {
    slow.emplace_back(server.port());
    ASSERT_TRUE(slow.back().Send("GET / HTTP/1.1\r\n"));
  }
  for (int round = 0; round < 10; ++round) {
    for (Raw& c : slow) c.Send("X-Slow: 1\r\n");
    const auto t0 = steady_clock::now();
    EXPECT_TRUE(Answers(server.port()));
    EXPECT_LT(steady_clock::now() - t0, milliseconds(1000));
    std::this_thread::sleep_for(milliseconds(300));
  }
}

// Connections beyond the limits are closed at once; other clients are served. Every connection
// the test counts stays open until the end (long timeouts, a kept-alive answered one), so the
// server's count never depends on when it notices a closed connection.
TEST(HttpServerTest, ConnectionLimitsInAllAndPerClient) {
  EchoHandler handler;
  HttpServerOptions o = Loopback();
  o.max_connections = 40;
  o.max_connections_per_client = 10;
  o.header_timeout = std::chrono::seconds(60);
  o.idle_timeout = std::chrono::seconds(60);
  HttpServer server(handler, o);
  ASSERT_TRUE(server.Start().ok());
  std::vector<Raw> held;
  for (int i = 0; i < 10; ++i) held.emplace_back(server.port(), "127.0.0.2");
  Raw extra(server.port(), "127.0.0.2");
  EXPECT_TRUE(extra.ClosedWithin(milliseconds(2000))) << "the 11th from one address";
  held.emplace_back(server.port());  // from 127.0.0.1: answered, and kept open (the 11th)
  ASSERT_TRUE(held.back().Send(Get("/healthz")));
  EXPECT_THAT(held.back().ReadResponse(), HasSubstr("200"));
  for (const char* source : {"127.0.0.3", "127.0.0.4", "127.0.0.5"}) {
    for (int i = 0; i < 10 && held.size() < 40; ++i) held.emplace_back(server.port(), source);
  }
  ASSERT_EQ(held.size(), 40u);
  Raw over(server.port(), "127.0.0.6");
  EXPECT_TRUE(over.ClosedWithin(milliseconds(2000))) << "the 41st in all";
  // The server accepts in arrival order, so a held one it had refused would be closed by now.
  for (Raw& c : held) EXPECT_FALSE(c.ClosedWithin(milliseconds(1))) << "a held one was refused";
  held.clear();
  // Freed slots are given again.
  bool answered = false;
  for (int i = 0; i < 50 && !answered; ++i) {
    answered = Answers(server.port());
    if (!answered) std::this_thread::sleep_for(milliseconds(20));
  }
  EXPECT_TRUE(answered);
}

// The probe listener answers while the API's connections are all taken; it serves probes only.
TEST(HttpServerTest, TheProbeListenerIsAReservedLane) {
  EchoHandler handler;
  HttpServerOptions o = Loopback();
  o.probe_listen = "127.0.0.1:0";
  o.max_connections = 5;
  o.max_connections_per_client = 5;
  HttpServer server(handler, o);
  ASSERT_TRUE(server.Start().ok());
  ASSERT_GT(server.probe_port(), 0);
  std::vector<Raw> held;
  for (int i = 0; i < 5; ++i) held.emplace_back(server.port());
  Raw refused(server.port());
  EXPECT_TRUE(refused.ClosedWithin(milliseconds(2000)));
  Raw probe(server.probe_port());
  ASSERT_TRUE(probe.Send(Get("/readyz")));
  EXPECT_THAT(probe.ReadResponse(), HasSubstr("GET /readyz  probe"));
}

// Bodies: a declared length over the limit is refused before reading; a chunked body is counted
// while it streams in; Expect: 100-continue is answered.
TEST(HttpServerTest, BodiesAreBounded) {
  EchoHandler handler;
  HttpServerOptions o = Loopback();
  o.max_body_bytes = 1000;
  HttpServer server(handler, o);
  ASSERT_TRUE(server.Start().ok());
  Raw declared(server.port());
  ASSERT_TRUE(declared.Send("POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 5000000\r\n\r\n"));
  EXPECT_THAT(declared.Read(milliseconds(2000)), HasSubstr("413"));
  Raw chunked(server.port());
  ASSERT_TRUE(chunked.Send("POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
  for (int i = 0; i < 10 && chunked.Send("100\r\n" + std::string(256, 'c') + "\r\n"); ++i) {
  }
  EXPECT_THAT(chunked.Read(milliseconds(2000)), HasSubstr("413"));
  Raw expect(server.port());
  ASSERT_TRUE(expect.Send(
      "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n"));
  EXPECT_THAT(expect.Read(milliseconds(2000), 25), HasSubstr("100 Continue"));
  ASSERT_TRUE(expect.Send("{}"));
  EXPECT_THAT(expect.ReadResponse(), HasSubstr("POST /x {}"));
}

// A saturated handler pool answers 503 with Retry-After beyond its queue; inline paths (healthz)
// are still answered on the I/O threads.
TEST(HttpServerTest, ASaturatedPoolAnswers503AndInlinePathsStillWork) {
  EchoHandler handler;
  HttpServerOptions o = Loopback();
  o.handler_threads = 1;
  o.max_queued_requests = 1;
  HttpServer server(handler, o);
  ASSERT_TRUE(server.Start().ok());
  Raw a(server.port()), b(server.port()), c(server.port());
  ASSERT_TRUE(a.Send(Get("/block")));
  ASSERT_TRUE(handler.AwaitBlocked(1));
  ASSERT_TRUE(b.Send(Get("/queued")));  // waits for the one thread
  std::this_thread::sleep_for(milliseconds(100));
  ASSERT_TRUE(c.Send(Get("/x")));
  const std::string busy = c.ReadResponse();
  EXPECT_THAT(busy, HasSubstr("503"));
  EXPECT_THAT(busy, HasSubstr("Retry-After: 1"));
  EXPECT_TRUE(Answers(server.port()));  // /healthz is inline
  handler.Release();
  EXPECT_THAT(a.ReadResponse(), HasSubstr("GET /block"));
  EXPECT_THAT(b.ReadResponse(), HasSubstr("GET /queued"));
}

}  // namespace
}  // namespace gnomon::server
