// The etcd backend over TLS against a real etcd serving https (--cert-file/--key-file, and
// --client-cert-auth with --trusted-ca-file), with certificates made by the openssl command line
// (src/testing/test_certificates.h): the conformance suite passes over https; a wrong CA, a
// certificate that does not name the host, a missing client certificate and plain http all fail
// at Open with a message naming the member and the reason.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "gnomon/etcd_coordinator.h"
#include "src/coord/coordinator_conformance.h"
#include "src/coord/etcd/etcd_test_util.h"
#include "src/testing/test_certificates.h"

namespace gnomon::testing {
namespace {

using ::testing::HasSubstr;

const TestCertificates& Certs() {
  static const TestCertificates* certs = new TestCertificates();
  return *certs;
}

TlsOptions Trusting(const std::string& ca, bool client_cert) {
  TlsOptions tls;
  tls.enabled = true;
  tls.ca_file = ca;
  if (client_cert) {
    tls.cert_file = Certs().File("client.crt");
    tls.key_file = Certs().File("client.key");
  }
  return tls;
}

// A member serving https with server.crt, requiring client certificates of the test CA; started
// on first use, killed when the program ends.
struct SharedTlsEtcd {
  TempDir dir;
  std::unique_ptr<EtcdMember> member;
};
std::unique_ptr<SharedTlsEtcd>& Slot() {
  static auto* slot = new std::unique_ptr<SharedTlsEtcd>();
  return *slot;
}
EtcdMember* Server() {
  std::unique_ptr<SharedTlsEtcd>& slot = Slot();
  if (!slot) {
    slot = std::make_unique<SharedTlsEtcd>();
    slot->member = std::make_unique<EtcdMember>("tls", slot->dir.path());
    slot->member->UseTls({Certs().File("server.crt"), Certs().File("server.key"), Certs().ca()},
                         Trusting(Certs().ca(), true));
    EXPECT_TRUE(slot->member->Spawn()) << "etcd did not start";
    EXPECT_TRUE(slot->member->WaitHealthy()) << "etcd did not become healthy over TLS";
  }
  return slot->member.get();
}
class Environment : public ::testing::Environment {
 public:
  void TearDown() override { Slot().reset(); }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new Environment);

bool CanRun() { return HaveEtcd() && HaveOpenssl() && Certs().ok(); }

std::string UniquePrefix() {
  static std::atomic<int> n{0};
  return "tls" + std::to_string(getpid()) + "-" + std::to_string(n.fetch_add(1)) + "/";
}

EtcdOptions Options(TlsOptions tls, const std::string& host = "127.0.0.1") {
  EtcdOptions o;
  o.endpoints = {{host, Server()->client_port()}};
  o.prefix = UniquePrefix();
  o.tls = std::move(tls);
  o.connect_timeout = std::chrono::seconds(2);
  o.io_timeout = std::chrono::seconds(2);
  return o;
}

std::vector<CoordinatorFactory> Factories() {
  if (!CanRun()) return {};
  return {{"EtcdTls", [](FakeClock* clock) -> std::unique_ptr<Coordinator> {
             EtcdOptions o = Options(Trusting(Certs().ca(), true));
             o.clock = clock;
             Result<std::unique_ptr<EtcdCoordinator>> c = EtcdCoordinator::Open(o);
             EXPECT_TRUE(c.ok()) << c.status().ToString();
             return c.ok() ? std::move(*c) : nullptr;
           }}};
}
INSTANTIATE_TEST_SUITE_P(EtcdTls, CoordinatorConformanceTest, ::testing::ValuesIn(Factories()),
                         CoordinatorFactoryName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(CoordinatorConformanceTest);

class EtcdTlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CanRun()) GTEST_SKIP() << "needs /usr/bin/etcd and /usr/bin/openssl";
  }
  static std::string OpenError(const EtcdOptions& o) {
    Result<std::unique_ptr<EtcdCoordinator>> c = EtcdCoordinator::Open(o);
    return c.ok() ? "<opened>" : c.status().ToString();
  }
  static std::string Member() { return "127.0.0.1:" + std::to_string(Server()->client_port()); }
};

TEST_F(EtcdTlsTest, TheRightCaAndClientCertificateOpen) {
  Result<std::unique_ptr<EtcdCoordinator>> c =
      EtcdCoordinator::Open(Options(Trusting(Certs().ca(), true)));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE((*c)->Now().ok());
}

TEST_F(EtcdTlsTest, AWrongCaFailsAtOpenNamingTheMember) {
  const std::string e = OpenError(Options(Trusting(Certs().other_ca(), true)));
  EXPECT_THAT(e, HasSubstr(Member()));
  EXPECT_THAT(e, HasSubstr("certificate is not trusted"));
}

TEST_F(EtcdTlsTest, ACertificateThatDoesNotNameTheHostFails) {
  // server.crt names 127.0.0.1 and localhost, not 127.0.0.2 (also loopback, also served).
  const std::string e = OpenError(Options(Trusting(Certs().ca(), true), "127.0.0.2"));
  EXPECT_THAT(e, HasSubstr("127.0.0.2:" + std::to_string(Server()->client_port())));
  EXPECT_THAT(e, HasSubstr("does not name the host"));
}

TEST_F(EtcdTlsTest, WithoutAClientCertificateTheHandshakeFails) {
  const std::string e = OpenError(Options(Trusting(Certs().ca(), false)));
  EXPECT_THAT(e, HasSubstr(Member()));
  EXPECT_THAT(e, HasSubstr("tls_cert/tls_key"));
}

TEST_F(EtcdTlsTest, PlainHttpToATlsMemberFails) {
  const std::string e = OpenError(Options(TlsOptions{}));
  EXPECT_THAT(e, HasSubstr(Member()));
  EXPECT_NE(e, "<opened>");
}

TEST_F(EtcdTlsTest, AnUnreadableCaFileFails) {
  const std::string e = OpenError(Options(Trusting(Certs().File("missing.pem"), true)));
  EXPECT_THAT(e, HasSubstr(Member()));
  EXPECT_THAT(e, HasSubstr("tls_ca"));
}

}  // namespace
}  // namespace gnomon::testing
