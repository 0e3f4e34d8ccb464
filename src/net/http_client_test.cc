// HttpClient against real servers on loopback ports (cpp-httplib, plain and TLS, in this
// process), with certificates made by the openssl command for this run (test_servers.h).
#include "src/net/http_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <stop_token>
#include <string>
#include <thread>
#include <vector>

#include "src/net/test_servers.h"

namespace gnomon::net {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::TestPki;
using testing::TestServer;

Duration SteadyNow() { return SystemClock::Get().SteadyNow(); }

// Byte `i` of the large answers: a pattern, so that kept bytes show where they came from.
char PatternByte(uint64_t i) { return static_cast<char>('a' + i % 26); }
std::string Pattern(uint64_t from, uint64_t n) {
  std::string s(n, '\0');
  for (uint64_t i = 0; i < n; ++i) s[i] = PatternByte(from + i);
  return s;
}

// Peak resident memory of this process (VmHWM), in KiB; reset first where the kernel allows.
int64_t PeakRssKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.starts_with("VmHWM:")) return std::atoll(line.c_str() + 6);
  }
  return -1;
}
void ResetPeakRss() { std::ofstream("/proc/self/clear_refs") << "5"; }

// A loopback port whose listen queue is full: a connect to it hangs (the kernel drops the SYN).
class FullBacklog {
 public:
  FullBacklog() {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        listen(listener_, 0) != 0) {
      return;
    }
    socklen_t len = sizeof addr;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    // Fill the queue (never accepted).
    for (int i = 0; i < 3; ++i) {
      const int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
      fillers_.push_back(s);
    }
  }
  ~FullBacklog() {
    for (int s : fillers_) close(s);
    close(listener_);
  }
  int port() const { return port_; }

 private:
  int listener_ = -1;
  int port_ = 0;
  std::vector<int> fillers_;
};

class HttpClientTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kHugeBytes = 100ull << 20;  // 100 MiB

  static void SetUpTestSuite() { pki_ = new TestPki(); }
  static void TearDownTestSuite() {
    delete pki_;
    pki_ = nullptr;
  }

  void SetUp() override {
    ASSERT_TRUE(pki_->ok()) << pki_->error();
    httplib::Server& s = plain_.server();
    s.Get("/hello", [this](const httplib::Request& req, httplib::Response& res) {
      Record(req);
      res.set_content("hello", "text/plain");
    });
    const auto echo = [this](const httplib::Request& req, httplib::Response& res) {
      Record(req);
      res.set_content(req.body, "text/plain");
    };
    s.Post("/echo", echo);
    s.Put("/echo", echo);
    s.Delete("/echo", echo);
    s.Get(R"(/status/(\d+))", [](const httplib::Request& req, httplib::Response& res) {
      res.status = std::stoi(req.matches[1]);
      res.set_content("status body", "text/plain");
    });
    s.Get(R"(/huge/(\d+))", [](const httplib::Request& req, httplib::Response& res) {
      const uint64_t total = std::stoull(req.matches[1]);
      // Served from one buffer: the server allocates nothing per chunk (under ASan, freed
      // chunks would sit in its quarantine and blur the client's memory figure).
      static const std::string kPeriodic = Pattern(0, 64 * 1024 + 26);
      res.set_content_provider(total, "application/octet-stream",
                               [](size_t offset, size_t length, httplib::DataSink& sink) {
                                 return sink.write(kPeriodic.data() + offset % 26,
                                                   std::min<size_t>(length, 64 * 1024));
                               });
    });
    s.Get("/block", [this](const httplib::Request& req, httplib::Response& res) {
      Record(req);
      std::unique_lock lock(mu_);
      ++entered_;
      cv_.notify_all();
      SystemClock::Get().WaitFor(lock, cv_, std::chrono::seconds(30), [&] { return released_; });
      res.set_content("late", "text/plain");
    });
    // Six bytes, 300 ms apart: slow, but never silent for a second.
    s.Get("/trickle", [this](const httplib::Request&, httplib::Response& res) {
      res.set_chunked_content_provider(
          "text/plain", [this](size_t offset, httplib::DataSink& sink) {
            if (offset >= 6) {
              sink.done();
              return true;
            }
            {
              std::unique_lock lock(mu_);
              SystemClock::Get().WaitFor(lock, cv_, std::chrono::milliseconds(300),
                                         [&] { return released_; });
            }
            return sink.write("x", 1);
          });
    });
    s.Get("/redirect", [](const httplib::Request& req, httplib::Response& res) {
      res.set_redirect(req.get_param_value("to"));
    });
    // Absolute-form targets arrive here when this server is used as a proxy.
    s.Get(".*", [this](const httplib::Request& req, httplib::Response& res) {
      Record(req);
      res.set_content("proxied " + req.target, "text/plain");
    });
    ASSERT_TRUE(plain_.Start());
  }

  void TearDown() override {
    Release();
    plain_.Stop();
  }

  struct Seen {
    std::string method;
    std::string target;
    httplib::Headers headers;
    std::string body;
  };
  void Record(const httplib::Request& req) {
    std::lock_guard lock(mu_);
    seen_.push_back({req.method, req.target, req.headers, req.body});
  }
  std::vector<Seen> seen() {
    std::lock_guard lock(mu_);
    return seen_;
  }
  void Release() {
    std::lock_guard lock(mu_);
    released_ = true;
    cv_.notify_all();
  }
  bool AwaitEntered(int n) {
    std::unique_lock lock(mu_);
    return SystemClock::Get().WaitFor(lock, cv_, std::chrono::seconds(20),
                                      [&] { return entered_ >= n; });
  }

  std::string Url(const std::string& path) const {
    return "http://127.0.0.1:" + std::to_string(plain_.port()) + path;
  }

  // Options that ignore any proxy of the environment the tests run in.
  static HttpClientOptions Direct() {
    HttpClientOptions o;
    o.proxy = "";
    return o;
  }
  static HttpRequest Get(std::string url) {
    HttpRequest r;
    r.url = std::move(url);
    return r;
  }

  static TestPki* pki_;
  TestServer plain_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Seen> seen_;  // guarded by mu_
  int entered_ = 0;         // guarded by mu_
  bool released_ = false;   // guarded by mu_
};

TestPki* HttpClientTest::pki_ = nullptr;

// ---- Requests and answers ----

TEST_F(HttpClientTest, GetReturnsStatusAndBody) {
  HttpClient client(Direct());
  Result<HttpResponse> r = client.Send(Get(Url("/hello")));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello");
  EXPECT_EQ(r->body_bytes, 5u);
  EXPECT_FALSE(r->body_truncated());
  ASSERT_EQ(seen().size(), 1u);
  EXPECT_EQ(seen()[0].headers.find("User-Agent")->second, "gnomon");
}

TEST_F(HttpClientTest, SendsMethodHeadersAndBodyAsGiven) {
  HttpClient client(Direct());
  HttpRequest req = Get(Url("/echo"));
  req.method = "POST";
  req.headers = {{"Content-Type", "application/json"}, {"X-Team", "fin"}};
  req.body = std::string(5000, 'x');  // above libcurl's old Expect: 100-continue threshold
  Result<HttpResponse> r = client.Send(req);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, req.body);
  const Seen s = seen().at(0);
  EXPECT_EQ(s.method, "POST");
  EXPECT_EQ(s.headers.find("Content-Type")->second, "application/json");
  EXPECT_EQ(s.headers.find("X-Team")->second, "fin");
  EXPECT_EQ(s.headers.count("Expect"), 0u);

  // Without a Content-Type, none is sent (not libcurl's form encoding); PUT and DELETE work.
  req.method = "PUT";
  req.headers.clear();
  req.body = "abc";
  ASSERT_TRUE(client.Send(req).ok());
  EXPECT_EQ(seen().at(1).method, "PUT");
  EXPECT_EQ(seen().at(1).body, "abc");
  EXPECT_EQ(seen().at(1).headers.count("Content-Type"), 0u);
  req.method = "DELETE";
  req.body.clear();
  ASSERT_TRUE(client.Send(req).ok());
  EXPECT_EQ(seen().at(2).method, "DELETE");
}

TEST_F(HttpClientTest, AnyStatusIsAnAnswer) {
  HttpClient client(Direct());
  for (const int status : {204, 302, 404, 429, 500, 503}) {
    Result<HttpResponse> r = client.Send(Get(Url("/status/" + std::to_string(status))));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, status);
  }
}

TEST_F(HttpClientTest, MalformedRequestsFailBeforeAnyConnection) {
  HttpClient client(Direct());
  HttpRequest req = Get(Url("/hello"));
  req.headers = {{"X-Evil", "a\r\nInjected: 1"}};
  Status s = client.Send(req).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("header X-Evil: the value has CR, LF or NUL"));
  req.headers = {{"X:Evil", "a"}};
  EXPECT_THAT(client.Send(req).status().message(), HasSubstr("\"X:Evil\" is not an HTTP token"));
  req.headers.clear();
  req.method = "GET /x";
  EXPECT_THAT(client.Send(req).status().message(), HasSubstr("the method is not an HTTP token"));
  s = client.Send(Get("http://user:s3cret@127.0.0.1:" + std::to_string(plain_.port()) + "/"))
          .status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("user info"), Not(HasSubstr("s3cret"))));
  EXPECT_THAT(client.Send(Get("ftp://127.0.0.1/")).status().message(),
              HasSubstr("unsupported scheme \"ftp\""));
  EXPECT_TRUE(seen().empty());
}

// ---- Transport errors say what failed ----

TEST_F(HttpClientTest, ConnectionRefusedIsAConnectError) {
  // A bound socket that does not listen refuses connections.
  const int sock = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(sock, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(sock, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string url = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/x";
  const Status s = HttpClient(Direct()).Send(Get(url)).status();
  close(sock);
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("GET " + url + ": connect: "));
}

TEST_F(HttpClientTest, UnknownHostIsADnsError) {
  const Status s = HttpClient(Direct()).Send(Get("http://gnomon-no-such-host.invalid/")).status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("GET http://gnomon-no-such-host.invalid/: DNS: "));
}

TEST_F(HttpClientTest, TotalTimeoutEndsASlowAnswer) {
  HttpClient client(Direct());
  HttpRequest req = Get(Url("/block"));
  req.timeout = std::chrono::milliseconds(300);
  const Duration start = SteadyNow();
  const Status s = client.Send(req).status();
  const Duration took = SteadyNow() - start;
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr(": total timeout 300ms ("));
  EXPECT_GE(took, std::chrono::milliseconds(290));
  EXPECT_LT(took, std::chrono::seconds(5));
}

TEST_F(HttpClientTest, IdleTimeoutEndsASilentAnswer) {
  HttpClientOptions o = Direct();
  o.total_timeout = Duration::zero();  // no total limit: only silence ends it
  o.idle_timeout = std::chrono::seconds(1);
  const Duration start = SteadyNow();
  const Status s = HttpClient(o).Send(Get(Url("/block"))).status();
  const Duration took = SteadyNow() - start;
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_THAT(s.message(), HasSubstr(": idle timeout 1s ("));
  EXPECT_GE(took, std::chrono::milliseconds(900));
  EXPECT_LT(took, std::chrono::seconds(10));
}

TEST_F(HttpClientTest, TheIdleTimeoutIsResetByEveryByte) {
  HttpClientOptions o = Direct();
  o.idle_timeout = std::chrono::seconds(1);
  const Duration start = SteadyNow();
  Result<HttpResponse> r = HttpClient(o).Send(Get(Url("/trickle")));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "xxxxxx");
  EXPECT_GT(SteadyNow() - start, std::chrono::milliseconds(1500));  // longer than the idle bound
}

TEST_F(HttpClientTest, ConnectTimeoutEndsAHangingConnect) {
  FullBacklog hang;
  ASSERT_GT(hang.port(), 0);
  HttpClientOptions o = Direct();
  o.connect_timeout = std::chrono::milliseconds(300);
  const Duration start = SteadyNow();
  const Status s =
      HttpClient(o).Send(Get("http://127.0.0.1:" + std::to_string(hang.port()) + "/")).status();
  const Duration took = SteadyNow() - start;
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr(": connect timeout 300ms ("));
  EXPECT_LT(took, std::chrono::seconds(5));
}

// ---- Cancellation ----

TEST_F(HttpClientTest, StopAbortsARequestInFlightWithin100ms) {
  HttpClientOptions o = Direct();
  o.total_timeout = std::chrono::seconds(60);
  HttpClient client(o);
  std::stop_source stop;
  HttpRequest req = Get(Url("/block"));
  req.stop = stop.get_token();
  Status status;
  Duration returned_at{0};
  std::thread caller([&] {
    status = client.Send(req).status();
    returned_at = SteadyNow();
  });
  ASSERT_TRUE(AwaitEntered(1));  // the server holds the request: the client waits for the answer
  const Duration stopped_at = SteadyNow();
  stop.request_stop();
  caller.join();
  EXPECT_EQ(status.code(), StatusCode::kUnavailable);
  EXPECT_THAT(status.message(), HasSubstr(": cancelled"));
  EXPECT_LT(returned_at - stopped_at, std::chrono::milliseconds(100));
}

TEST_F(HttpClientTest, StopAbortsAHangingConnectWithin100ms) {
  FullBacklog hang;
  ASSERT_GT(hang.port(), 0);
  HttpClientOptions o = Direct();
  o.connect_timeout = std::chrono::seconds(60);
  HttpClient client(o);
  std::stop_source stop;
  HttpRequest req = Get("http://127.0.0.1:" + std::to_string(hang.port()) + "/");
  req.stop = stop.get_token();
  Status status;
  Duration returned_at{0};
  std::thread caller([&] {
    status = client.Send(req).status();
    returned_at = SteadyNow();
  });
  // Give the connect time to start (if the stop came first, the call would return at once too).
  {
    std::unique_lock lock(mu_);
    SystemClock::Get().WaitFor(lock, cv_, std::chrono::milliseconds(300), [] { return false; });
  }
  const Duration stopped_at = SteadyNow();
  stop.request_stop();
  caller.join();
  EXPECT_THAT(status.message(), HasSubstr(": cancelled"));
  EXPECT_LT(returned_at - stopped_at, std::chrono::milliseconds(100));
}

TEST_F(HttpClientTest, StopBeforeTheCallSendsNothing) {
  std::stop_source stop;
  stop.request_stop();
  HttpRequest req = Get(Url("/hello"));
  req.stop = stop.get_token();
  EXPECT_THAT(HttpClient(Direct()).Send(req).status().message(), HasSubstr(": cancelled"));
  EXPECT_TRUE(seen().empty());
}

// ---- The response cap ----

TEST_F(HttpClientTest, A100MBAnswerKeepsTheCapAndMemoryStaysBounded) {
  HttpClientOptions o = Direct();
  o.max_body_bytes = 64 * 1024;
  o.total_timeout = std::chrono::minutes(5);
  ResetPeakRss();
  const int64_t peak_before = PeakRssKiB();
  Result<HttpResponse> r = HttpClient(o).Send(Get(Url("/huge/" + std::to_string(kHugeBytes))));
  const int64_t peak_after = PeakRssKiB();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body_bytes, kHugeBytes);  // everything was read...
  EXPECT_TRUE(r->body_truncated());
  EXPECT_EQ(r->body, Pattern(0, 64 * 1024));  // ...and the first 64 KiB kept
  ASSERT_GT(peak_before, 0);
  EXPECT_LT(peak_after - peak_before, 32 * 1024)
      << "peak RSS grew by " << peak_after - peak_before << " KiB while reading 100 MiB";
}

TEST_F(HttpClientTest, TailModeKeepsTheLastBytes) {
  HttpClientOptions o = Direct();
  o.max_body_bytes = 1000;
  o.keep_body_tail = true;
  const uint64_t total = 5 * 1024 * 1024 + 7;
  Result<HttpResponse> r = HttpClient(o).Send(Get(Url("/huge/" + std::to_string(total))));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body_bytes, total);
  EXPECT_EQ(r->body, Pattern(total - 1000, 1000));
  // A short body is kept whole in either mode.
  Result<HttpResponse> small = HttpClient(o).Send(Get(Url("/hello")));
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->body, "hello");
  EXPECT_FALSE(small->body_truncated());
}

// ---- TLS ----

class HttpClientTlsTest : public HttpClientTest {
 protected:
  void SetUp() override {
    HttpClientTest::SetUp();
    if (HasFatalFailure()) return;
    tls_ = std::make_unique<TestServer>(pki_->Path("server.pem"), pki_->Path("server.key"));
    tls_->server().Get("/hello", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("secure hello", "text/plain");
    });
    ASSERT_TRUE(tls_->Start());
    mtls_ = std::make_unique<TestServer>(pki_->Path("server.pem"), pki_->Path("server.key"),
                                         pki_->Path("ca.pem"));
    mtls_->server().Get("/whoami", [](const httplib::Request& req, httplib::Response& res) {
      res.set_content(testing::PeerCommonName(req), "text/plain");
    });
    ASSERT_TRUE(mtls_->Start());
  }
  void TearDown() override {
    if (mtls_) mtls_->Stop();
    if (tls_) tls_->Stop();
    HttpClientTest::TearDown();
  }
  HttpClientOptions WithCa(const std::string& ca = "ca.pem") const {
    HttpClientOptions o = Direct();
    o.tls.ca_file = pki_->Path(ca);
    o.connect_timeout = std::chrono::seconds(5);
    return o;
  }
  std::string TlsUrl(const std::string& host, int port, const std::string& path) const {
    return "https://" + host + ":" + std::to_string(port) + path;
  }

  std::unique_ptr<TestServer> tls_;
  std::unique_ptr<TestServer> mtls_;
};

TEST_F(HttpClientTlsTest, TheRightCaVerifiesTheServer) {
  HttpClient client(WithCa());
  for (const std::string host : {"localhost", "127.0.0.1"}) {  // the DNS and the IP name
    Result<HttpResponse> r = client.Send(Get(TlsUrl(host, tls_->port(), "/hello")));
    ASSERT_TRUE(r.ok()) << host << ": " << r.status().ToString();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "secure hello");
  }
}

TEST_F(HttpClientTlsTest, AWrongCaFailsNamingThePeer) {
  const std::string url = TlsUrl("localhost", tls_->port(), "/hello");
  const Status s = HttpClient(WithCa("other-ca.pem")).Send(Get(url)).status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(), HasSubstr("GET " + url + ": TLS: the certificate of localhost:" +
                                     std::to_string(tls_->port()) + " was not verified: "));
  // The system CAs do not know the test CA either.
  HttpClientOptions system = Direct();
  EXPECT_THAT(HttpClient(system).Send(Get(url)).status().message(), HasSubstr("was not verified"));
}

TEST_F(HttpClientTlsTest, AWrongHostNameFails) {
  HttpClientOptions o = WithCa();
  // wrong.test resolves to the server, whose certificate names localhost and 127.0.0.1 only.
  o.resolve = {"wrong.test:" + std::to_string(tls_->port()) + ":127.0.0.1"};
  const Status s = HttpClient(o).Send(Get(TlsUrl("wrong.test", tls_->port(), "/hello"))).status();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_THAT(s.message(),
              AllOf(HasSubstr("TLS: the certificate of wrong.test:"), HasSubstr("'wrong.test'")));
  // Without verification the same request goes through (the option is honoured both ways).
  o.tls.verify = false;
  o.tls.ca_file = pki_->Path("other-ca.pem");
  Result<HttpResponse> r = HttpClient(o).Send(Get(TlsUrl("wrong.test", tls_->port(), "/hello")));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "secure hello");
}

TEST_F(HttpClientTlsTest, AClientCertificateIsSentWhenConfigured) {
  const std::string url = TlsUrl("localhost", mtls_->port(), "/whoami");
  // The server requires one: without it the request fails.
  const Status without = HttpClient(WithCa()).Send(Get(url)).status();
  EXPECT_EQ(without.code(), StatusCode::kUnavailable) << without.ToString();
  HttpClientOptions o = WithCa();
  o.tls.cert_file = pki_->Path("client.pem");
  o.tls.key_file = pki_->Path("client.key");
  Result<HttpResponse> r = HttpClient(o).Send(Get(url));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "gnomon-client");
}

TEST_F(HttpClientTlsTest, UnusableTlsFilesAreNamed) {
  HttpClientOptions o = WithCa();
  o.tls.ca_file = pki_->Path("missing-ca.pem");
  const std::string url = TlsUrl("localhost", tls_->port(), "/hello");
  EXPECT_THAT(HttpClient(o).Send(Get(url)).status().message(), HasSubstr("missing-ca.pem"));
  EXPECT_THAT(ValidateTlsOptions(o.tls).message(),
              HasSubstr("tls.ca_file: \"" + o.tls.ca_file + "\": No such file"));
  o = WithCa();
  o.tls.cert_file = pki_->Path("missing-client.pem");
  o.tls.key_file = pki_->Path("client.key");
  const Status s = HttpClient(o).Send(Get(url)).status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("missing-client.pem"));
  o.tls.key_file.clear();
  EXPECT_THAT(ValidateTlsOptions(o.tls).message(), HasSubstr("must be set together"));
  EXPECT_TRUE(ValidateTlsOptions(WithCa().tls).ok());
  EXPECT_TRUE(ValidateTlsOptions(TlsOptions{}).ok());
}

TEST_F(HttpClientTlsTest, ManyThreadsShareOneClient) {
  HttpClient client(WithCa());
  std::atomic<int> ok{0};
  std::vector<std::string> errors(8);
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 8; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0; i < 10; ++i) {
          Result<HttpResponse> r = client.Send(Get(TlsUrl("localhost", tls_->port(), "/hello")));
          if (r.ok() && r->body == "secure hello") {
            ++ok;
          } else if (!r.ok()) {
            errors[t] = r.status().ToString();
          }
        }
      });
    }
  }
  EXPECT_EQ(ok.load(), 80);
  for (const std::string& e : errors) EXPECT_EQ(e, "");
}

// ---- The egress filter ----

TEST_F(HttpClientTest, TheMetadataAddressIsRefusedWithoutAConnection) {
  HttpClientOptions o = Direct();
  o.connect_timeout = std::chrono::seconds(10);
  const Duration start = SteadyNow();
  const Status s = HttpClient(o).Send(Get("http://169.254.169.254/latest/meta-data/")).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(),
            "GET http://169.254.169.254/latest/meta-data/: egress: 169.254.169.254 is denied by "
            "egress_deny "
            "169.254.0.0/16");
  EXPECT_LT(SteadyNow() - start, std::chrono::seconds(1));
  EXPECT_THAT(HttpClient(o).Send(Get("http://[fe80::1]/")).status().message(),
              HasSubstr("egress: fe80::1 is denied by egress_deny fe80::/10"));
}

TEST_F(HttpClientTest, ANameResolvingToADeniedAddressIsRefusedAtConnect) {
  // DNS rebinding: the name looks harmless, its address is not. The check sees the address
  // libcurl is about to connect to, and refuses it before a socket exists.
  HttpClientOptions o = Direct();
  o.resolve = {"metadata.test:80:169.254.169.254"};
  const Duration start = SteadyNow();
  const Status s = HttpClient(o).Send(Get("http://metadata.test/latest/")).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_EQ(s.message(),
            "GET http://metadata.test/latest/: egress: 169.254.169.254 is denied by egress_deny "
            "169.254.0.0/16");
  EXPECT_LT(SteadyNow() - start, std::chrono::seconds(1));
}

TEST_F(HttpClientTest, OtherNotationsOfADeniedAddressAreRefusedAtConnect) {
  // Not IP literals to the URL check (libcurl reads them as 169.254.169.254): the socket check
  // catches them.
  for (const std::string host : {"2852039166", "0xa9fea9fe", "169.254.43518"}) {
    const Status s = HttpClient(Direct()).Send(Get("http://" + host + "/")).status();
    EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << host << ": " << s.ToString();
    EXPECT_THAT(s.message(),
                HasSubstr("egress: 169.254.169.254 is denied by egress_deny 169.254.0.0/16"));
  }
}

TEST_F(HttpClientTest, LocalhostIsRefusedByARuleDenyingLoopback) {
  HttpClientOptions o = Direct();
  Result<EgressRule> rule = EgressRule::Parse({}, {"127.0.0.0/8"});
  ASSERT_TRUE(rule.ok());
  o.egress = *rule;
  const Status s = HttpClient(o)
                       .Send(Get("http://localhost:" + std::to_string(plain_.port()) + "/hello"))
                       .status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("egress: 127.0.0.1 is denied by egress_deny 127.0.0.0/8"));
  EXPECT_TRUE(seen().empty());
}

TEST_F(HttpClientTest, DenyWinsOverAllowOnRealConnections) {
  const auto send = [&](const std::vector<std::string>& allow,
                        const std::vector<std::string>& deny) {
    HttpClientOptions o = Direct();
    Result<EgressRule> rule = EgressRule::Parse(allow, deny);
    EXPECT_TRUE(rule.ok()) << rule.status().ToString();
    o.egress = *rule;
    return HttpClient(o).Send(Get("http://localhost:" + std::to_string(plain_.port()) + "/hello"));
  };
  EXPECT_TRUE(send({"127.0.0.0/8"}, {}).ok());
  EXPECT_TRUE(send({}, {"10.0.0.0/8"}).ok());
  EXPECT_THAT(send({"127.0.0.0/8"}, {"127.0.0.1/32"}).status().message(),
              HasSubstr("egress: 127.0.0.1 is denied by egress_deny 127.0.0.1/32"));
  EXPECT_THAT(send({"10.0.0.0/8"}, {}).status().message(),
              HasSubstr("egress: 127.0.0.1 is not in egress_allow (10.0.0.0/8)"));
  EXPECT_EQ(seen().size(), 2u);  // only the two allowed requests arrived
}

TEST_F(HttpClientTest, ARedirectCannotEscapeTheFilter) {
  // A second server on 127.0.0.2, which the rule denies; the first one redirects there.
  std::atomic<int> hits{0};
  TestServer inner;
  inner.server().Get("/secret", [&](const httplib::Request&, httplib::Response& res) {
    ++hits;
    res.set_content("secret", "text/plain");
  });
  ASSERT_TRUE(inner.Start("127.0.0.2"));
  const std::string target = "http://127.0.0.2:" + std::to_string(inner.port()) + "/secret";
  const std::string url = Url("/redirect?to=" + target);
  Result<EgressRule> rule = EgressRule::Parse({}, {"127.0.0.2/32"});
  ASSERT_TRUE(rule.ok());

  // Redirects are not followed by default: the 302 is the answer.
  HttpClientOptions o = Direct();
  o.egress = *rule;
  Result<HttpResponse> r = HttpClient(o).Send(Get(url));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->status, 302);
  // Followed, the hop is checked like the first connection.
  o.max_redirects = 5;
  const Status s = HttpClient(o).Send(Get(url)).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("egress: 127.0.0.2 is denied by egress_deny 127.0.0.2/32"));
  EXPECT_EQ(hits.load(), 0);
  // The same redirect with an allowing rule reaches the second server (the setup is real).
  o.egress = EgressRule::Default();
  r = HttpClient(o).Send(Get(url));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "secret");
  EXPECT_EQ(hits.load(), 1);
  inner.Stop();
}

// ---- Proxy ----

TEST_F(HttpClientTest, AProxyIsUsedAndTheFilterChecksItsAddress) {
  HttpClientOptions o;
  o.proxy = "http://127.0.0.1:" + std::to_string(plain_.port());
  Result<HttpResponse> r = HttpClient(o).Send(Get("http://target.test/path"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->body, "proxied http://target.test/path");
  // A rule denying the proxy's address refuses the request.
  Result<EgressRule> rule = EgressRule::Parse({}, {"127.0.0.1/32"});
  ASSERT_TRUE(rule.ok());
  o.egress = *rule;
  EXPECT_THAT(HttpClient(o).Send(Get("http://target.test/path")).status().message(),
              HasSubstr("egress: 127.0.0.1 is denied by egress_deny 127.0.0.1/32"));
}

TEST_F(HttpClientTest, TheProxyEnvironmentIsHonouredUnlessTurnedOff) {
  const std::string proxy = "http://127.0.0.1:" + std::to_string(plain_.port());
  ASSERT_EQ(setenv("http_proxy", proxy.c_str(), 1), 0);
  ASSERT_EQ(unsetenv("no_proxy"), 0);
  ASSERT_EQ(unsetenv("NO_PROXY"), 0);
  Result<HttpResponse> via_env = HttpClient().Send(Get("http://target.test/env"));
  // no_proxy names the target: reached directly (and target.test does not resolve).
  ASSERT_EQ(setenv("no_proxy", "target.test", 1), 0);
  const Status direct = HttpClient().Send(Get("http://target.test/env")).status();
  ASSERT_EQ(unsetenv("no_proxy"), 0);
  // proxy = "" ignores the environment.
  const Status off = HttpClient(Direct()).Send(Get("http://target.test/env")).status();
  ASSERT_EQ(unsetenv("http_proxy"), 0);
  ASSERT_TRUE(via_env.ok()) << via_env.status().ToString();
  EXPECT_EQ(via_env->body, "proxied http://target.test/env");
  EXPECT_THAT(direct.message(), HasSubstr("DNS: "));
  EXPECT_THAT(off.message(), HasSubstr("DNS: "));
}

}  // namespace
}  // namespace gnomon::net
