// TLS on the API listener against real sockets, with certificates made by the openssl command line
// (src/testing/test_certificates.h): the configured certificate is served and verifies, a client
// trusting another CA or speaking plain HTTP gets nothing, mutual TLS admits only certificates of
// client_ca and passes their subject on, where the API maps it to a [[token]]; bad files fail at
// start naming the option and file; a renewed certificate is picked up by ReloadCertificates.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <string>

#include "gnomon/testing/fake_clock.h"
#include "gnomon/testing/memory_coordinator.h"
#include "gnomon/testing/recording_executor.h"
#include "src/server/http_server.h"
#include "src/server/test_api_server.h"
#include "src/testing/test_certificates.h"

namespace gnomon::server {
namespace {

using ::testing::HasSubstr;
using testing::TestCertificates;

const TestCertificates& Certs() {
  static const TestCertificates* certs = new TestCertificates();
  return *certs;
}

// Answers with the client certificate's subject.
class SubjectHandler final : public HttpHandler {
 public:
  std::optional<Response> Admit(const Request&) override { return std::nullopt; }
  Response Handle(const Request& r) override {
    return Response{200, "text/plain", "subject=" + r.client_subject, {}};
  }
};

class HttpTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Certs().ok()) GTEST_SKIP() << "openssl could not make certificates: " << Certs().Log();
    ::signal(SIGPIPE, SIG_IGN);
  }

  HttpServerOptions Tls(bool mutual = false) const {
    HttpServerOptions o;
    o.listen = "127.0.0.1:0";
    o.tls_cert = Certs().File("server.crt");
    o.tls_key = Certs().File("server.key");
    if (mutual) o.client_ca = Certs().ca();
    return o;
  }

  // An HTTPS client trusting `ca`, with client.crt when `client_cert`.
  static std::unique_ptr<httplib::SSLClient> Client(int port, const std::string& ca,
                                                    const std::string& cert = "",
                                                    const std::string& key = "") {
    auto c = cert.empty() ? std::make_unique<httplib::SSLClient>("127.0.0.1", port)
                          : std::make_unique<httplib::SSLClient>("127.0.0.1", port, cert, key);
    c->set_ca_cert_path(ca.c_str());
    c->enable_server_certificate_verification(true);
    c->set_connection_timeout(5, 0);
    c->set_read_timeout(5, 0);
    return c;
  }

  SubjectHandler handler_;
};

TEST_F(HttpTlsTest, ServesTheConfiguredCertificateToAClientTrustingItsCa) {
  HttpServer server(handler_, Tls());
  ASSERT_TRUE(server.Start().ok());
  auto c = Client(server.port(), Certs().ca());
  auto r = c->Get("/x");
  ASSERT_TRUE(r) << httplib::to_string(r.error()) << " " << c->get_openssl_verify_result();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "subject=");  // no client certificate asked for without client_ca
  // Keep-alive over TLS: a second request on the same connection.
  auto again = c->Get("/y");
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
}

TEST_F(HttpTlsTest, AClientTrustingAnotherCaRefusesTheServer) {
  HttpServer server(handler_, Tls());
  ASSERT_TRUE(server.Start().ok());
  auto c = Client(server.port(), Certs().other_ca());
  auto r = c->Get("/x");
  EXPECT_FALSE(r);
  if (!r) {
    EXPECT_EQ(r.error(), httplib::Error::SSLServerVerification);
  }
}

// Connects to 127.0.0.1:port; -1 on failure.
int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Reads until the peer closes or `wait` passes; what arrived, and whether the peer closed.
std::pair<std::string, bool> ReadUntilClosed(int fd, std::chrono::milliseconds wait) {
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (true) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return {out, false};
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return {out, true};
    out.append(buf, static_cast<size_t>(n));
  }
}

TEST_F(HttpTlsTest, PlainHttpToTheTlsListenerGetsNoHttpAnswer) {
  HttpServer server(handler_, Tls());
  ASSERT_TRUE(server.Start().ok());
  const int fd = Connect(server.port());
  ASSERT_GE(fd, 0);
  const std::string req = "GET /x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  ASSERT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  auto [got, closed] = ReadUntilClosed(fd, std::chrono::seconds(5));
  ::close(fd);
  EXPECT_TRUE(closed);
  EXPECT_THAT(got, ::testing::Not(HasSubstr("subject=")));
  EXPECT_THAT(got, ::testing::Not(HasSubstr("HTTP/1.1 200")));
}

TEST_F(HttpTlsTest, AClientThatNeverCompletesTheHandshakeIsCutAtTheHeaderTimeout) {
  HttpServerOptions o = Tls();
  o.header_timeout = std::chrono::milliseconds(300);
  HttpServer server(handler_, o);
  ASSERT_TRUE(server.Start().ok());
  const int fd = Connect(server.port());
  ASSERT_GE(fd, 0);
  // The first bytes of a ClientHello record, then silence.
  const char partial[] = {0x16, 0x03, 0x01, 0x02, 0x00};
  ASSERT_EQ(::send(fd, partial, sizeof partial, MSG_NOSIGNAL), 5);
  const auto start = std::chrono::steady_clock::now();
  auto [got, closed] = ReadUntilClosed(fd, std::chrono::seconds(10));
  ::close(fd);
  EXPECT_TRUE(closed);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST_F(HttpTlsTest, MutualTlsAdmitsOnlyCertificatesOfTheClientCaAndPassesTheSubjectOn) {
  HttpServer server(handler_, Tls(/*mutual=*/true));
  ASSERT_TRUE(server.Start().ok());
  // Without a certificate: the handshake fails.
  auto none = Client(server.port(), Certs().ca());
  EXPECT_FALSE(none->Get("/x"));
  // A self-signed certificate the client CA did not sign: refused.
  auto self =
      Client(server.port(), Certs().ca(), Certs().File("self.crt"), Certs().File("self.key"));
  EXPECT_FALSE(self->Get("/x"));
  // The CA's client certificate: admitted, its subject reaches the handler.
  auto good =
      Client(server.port(), Certs().ca(), Certs().File("client.crt"), Certs().File("client.key"));
  auto r = good->Get("/x");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->body, std::string("subject=") + TestCertificates::kClientSubject);
}

TEST_F(HttpTlsTest, BadCertificateFilesFailAtStartNamingTheOptionAndFile) {
  auto start = [&](HttpServerOptions o) {
    HttpServer server(handler_, std::move(o));
    return server.Start();
  };
  HttpServerOptions missing = Tls();
  missing.tls_cert = Certs().File("nope.crt");
  Status s = start(missing);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("tls_cert: \"" + Certs().File("nope.crt") + "\""));

  HttpServerOptions mismatch = Tls();
  mismatch.tls_key = Certs().File("client.key");
  s = start(mismatch);
  EXPECT_THAT(s.message(), HasSubstr("tls_key"));
  EXPECT_THAT(s.message(), HasSubstr("is not the key of tls_cert"));

  HttpServerOptions key_as_cert = Tls();
  key_as_cert.tls_cert = Certs().File("server.key");
  EXPECT_THAT(start(key_as_cert).message(), HasSubstr("not a readable PEM certificate"));

  HttpServerOptions bad_ca = Tls(true);
  bad_ca.client_ca = Certs().File("client.key");
  EXPECT_THAT(start(bad_ca).message(), HasSubstr("client_ca: \""));

  HttpServerOptions half = Tls();
  half.tls_key.clear();
  EXPECT_THAT(start(half).message(), HasSubstr("tls_cert and tls_key go together"));

  HttpServerOptions ca_only;
  ca_only.listen = "127.0.0.1:0";
  ca_only.client_ca = Certs().ca();
  EXPECT_THAT(start(ca_only).message(), HasSubstr("client_ca needs tls_cert"));
}

TEST_F(HttpTlsTest, ARenewedCertificateIsServedAfterReloadCertificates) {
  namespace fs = std::filesystem;
  const std::string dir = Certs().File("reload");
  fs::create_directories(dir);
  const std::string cert = dir + "/api.crt", key = dir + "/api.key";
  auto install = [&](const char* c, const char* k) {
    fs::copy_file(Certs().File(c), cert, fs::copy_options::overwrite_existing);
    fs::copy_file(Certs().File(k), key, fs::copy_options::overwrite_existing);
  };
  install("self.crt", "self.key");
  HttpServerOptions o = Tls();
  o.tls_cert = cert;
  o.tls_key = key;
  HttpServer server(handler_, o);
  ASSERT_TRUE(server.Start().ok());
  EXPECT_FALSE(Client(server.port(), Certs().ca())->Get("/x"));  // self-signed: not the CA's

  install("server.crt", "server.key");
  ASSERT_TRUE(server.ReloadCertificates().ok());
  EXPECT_TRUE(Client(server.port(), Certs().ca())->Get("/x"));

  // A broken renewal changes nothing.
  std::ofstream(cert, std::ios::trunc) << "not a certificate";
  Status s = server.ReloadCertificates();
  EXPECT_THAT(s.message(), HasSubstr("tls_cert"));
  EXPECT_TRUE(Client(server.port(), Certs().ca())->Get("/x"));
}

TEST_F(HttpTlsTest, ReloadCertificatesWithoutTlsIsRefused) {
  HttpServerOptions o;
  o.listen = "127.0.0.1:0";
  HttpServer server(handler_, o);
  ASSERT_TRUE(server.Start().ok());
  EXPECT_EQ(server.ReloadCertificates().code(), StatusCode::kFailedPrecondition);
}

// The API over mutual TLS: a client certificate stands for the [[token]] with its subject.
class ApiMutualTlsTest : public HttpTlsTest {
 protected:
  void SetUp() override {
    HttpTlsTest::SetUp();
    if (IsSkipped()) return;
    SchedulerOptions so;
    so.node_id = "n1";
    so.worker_threads = 1;
    scheduler_ = std::make_unique<Scheduler>(so, coord_, exec_, clock_);
    ASSERT_TRUE(scheduler_->Start().ok());
  }
  void TearDown() override {
    if (api_) api_->server.Stop();
    if (scheduler_) scheduler_->Stop();
  }
  void Start(std::vector<ApiToken> tokens) {
    HttpApiOptions o;
    o.clock = &clock_;
    api_ = std::make_unique<TestApiServer>(*scheduler_, coord_, metrics_, std::move(tokens), o,
                                           Tls(/*mutual=*/true));
    Status s = api_->Start();
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  std::unique_ptr<httplib::SSLClient> WithClientCert() const {
    auto c =
        Client(api_->port(), Certs().ca(), Certs().File("client.crt"), Certs().File("client.key"));
    return c;
  }

  testing::FakeClock clock_;
  testing::MemoryCoordinator coord_{clock_};
  testing::RecordingExecutor exec_;
  MetricsObserver metrics_{"9.9.9"};
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<TestApiServer> api_;
};

constexpr char kBearer[] = "bearer-secret-0123456789";

TEST_F(ApiMutualTlsTest, TheCertificateSubjectStandsForItsToken) {
  ApiToken by_cert{"ci-cert", "", TokenRole::kOperate,
                   {"ci."},   0,  TestCertificates::kClientSubject};
  Start({by_cert, ApiToken{"adm", kBearer, TokenRole::kAdmin, {}, 0}});
  auto c = WithClientCert();
  auto list = c->Get("/api/v1/jobs");
  ASSERT_TRUE(list) << httplib::to_string(list.error());
  EXPECT_EQ(list->status, 200) << list->body;
  // Its role: operate, not admin.
  auto create = c->Post("/api/v1/jobs", R"({"id":"ci.x","schedule":"@hourly","command":"true"})",
                        "application/json");
  ASSERT_TRUE(create);
  EXPECT_EQ(create->status, 403) << create->body;
  EXPECT_THAT(create->body, HasSubstr("ci-cert"));
  // A bearer token on the same connection decides instead of the certificate.
  auto as_admin =
      c->Post("/api/v1/jobs", {{"Authorization", std::string("Bearer ") + kBearer}},
              R"({"id":"ci.x","schedule":"@hourly","command":"true"})", "application/json");
  ASSERT_TRUE(as_admin);
  EXPECT_EQ(as_admin->status, 201) << as_admin->body;
  // A wrong bearer token is not rescued by the certificate.
  auto wrong = c->Get("/api/v1/jobs", {{"Authorization", "Bearer not-a-token-0123456789"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
}

TEST_F(ApiMutualTlsTest, ACertificateOfNoTokensSubjectIsUnauthenticated) {
  Start({ApiToken{"someone-else", "", TokenRole::kAdmin, {}, 0, "CN=someone-else"}});
  auto r = WithClientCert()->Get("/api/v1/jobs");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 401);
  EXPECT_THAT(r->body, HasSubstr(TestCertificates::kClientSubject));
}

TEST(TokenSubjectTest, TokensHaveExactlyOneOfSecretAndSubject) {
  EXPECT_TRUE(ValidateTokens({ApiToken{"a", "", TokenRole::kRead, {}, 0, "CN=a"}}).ok());
  EXPECT_THAT(ValidateTokens({ApiToken{"a", kBearer, TokenRole::kRead, {}, 0, "CN=a"}}).message(),
              HasSubstr("exactly one of token and subject"));
  EXPECT_THAT(ValidateTokens({ApiToken{"a", "", TokenRole::kRead, {}, 0, ""}}).message(),
              HasSubstr("exactly one of token and subject"));
  EXPECT_THAT(ValidateTokens({ApiToken{"a", "", TokenRole::kRead, {}, 0, "CN=a"},
                              ApiToken{"b", "", TokenRole::kRead, {}, 0, "CN=a"}})
                  .message(),
              HasSubstr("subject: the same as token \"a\""));
  EXPECT_THAT(ValidateTokens({ApiToken{"a", "", TokenRole::kRead, {}, 0, "CN=a\nCN=b"}}).message(),
              HasSubstr("control character"));
  // A subject token is never found by a bearer secret, however it is spelled.
  TokenSet set({ApiToken{"a", "", TokenRole::kRead, {}, 0, "CN=a"}});
  EXPECT_EQ(set.Find(""), nullptr);
  EXPECT_EQ(set.Find("CN=a"), nullptr);
  EXPECT_NE(set.FindSubject("CN=a"), nullptr);
  EXPECT_EQ(set.FindSubject(""), nullptr);
}

}  // namespace
}  // namespace gnomon::server
