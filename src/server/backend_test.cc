// OpenBackend over TLS against a real redis-server and Redis Sentinel serving TLS only
// (src/coord/redis/redis_tls_testing.h; ctest label "integration"). URL parsing itself is tested
// in apps/gnomon/config_test.cc (BackendUrlTest).
#include "src/server/backend.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "src/coord/redis/redis_tls_testing.h"

namespace gnomon::server {
namespace {

using ::gnomon::testing::HaveRedisTlsTools;
using ::gnomon::testing::TestCertificates;
using ::gnomon::testing::TlsRedisServer;
using ::testing::HasSubstr;

TEST(BackendTlsTest, OpensRedissAndWarnsWhenVerificationIsOff) {
  if (!HaveRedisTlsTools()) GTEST_SKIP() << "redis-server or openssl is missing";
  TestCertificates certs;
  ASSERT_TRUE(certs.ok());
  TlsRedisServer server(certs, {});
  ASSERT_TRUE(server.Start()) << server.Log();
  const std::string address = "127.0.0.1:" + std::to_string(server.port());

  Result<OpenedBackend> verified =
      OpenBackend("rediss://" + address + "?tls_ca=" + certs.ca(), false);
  ASSERT_TRUE(verified.ok()) << verified.status().ToString();
  EXPECT_NE(verified->coordinator, nullptr);
  EXPECT_EQ(verified->unverified_tls, "");

  Result<OpenedBackend> unverified =
      OpenBackend("rediss://" + address + "?tls_verify=false", false);
  ASSERT_TRUE(unverified.ok()) << unverified.status().ToString();
  EXPECT_THAT(unverified->unverified_tls, HasSubstr("tls_verify=false"));

  Result<OpenedBackend> refused = OpenBackend("rediss://" + address, false);  // system CAs
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("redis " + address + ": TLS: certificate verify failed ("));

  // rediss+sentinel://: the sentinel and the primary it names, both over TLS.
  TlsRedisServer::Options sentinel_options;
  sentinel_options.sentinel_of = server.port();
  TlsRedisServer sentinel(certs, sentinel_options);
  ASSERT_TRUE(sentinel.Start()) << sentinel.Log();
  Result<OpenedBackend> via_sentinel =
      OpenBackend("rediss+sentinel://127.0.0.1:" + std::to_string(sentinel.port()) +
                      "/mymaster?tls_ca=" + certs.ca(),
                  false);
  ASSERT_TRUE(via_sentinel.ok()) << via_sentinel.status().ToString();
  Result<int64_t> version = via_sentinel->coordinator->JobsVersion();
  EXPECT_TRUE(version.ok()) << version.status().ToString();
}

}  // namespace
}  // namespace gnomon::server
