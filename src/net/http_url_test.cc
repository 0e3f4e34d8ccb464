#include "src/net/http_url.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace gnomon::net {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TEST(HttpUrlTest, ParsesHostPortAndPath) {
  Result<HttpUrl> u = ParseHttpUrl("HTTPS://example.com:8443/a/b?x=1#frag");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->scheme, "https");
  EXPECT_EQ(u->host, "example.com");
  EXPECT_EQ(u->authority, "example.com:8443");
  EXPECT_EQ(u->port, 8443);
  EXPECT_EQ(u->path, "/a/b?x=1");

  u = ParseHttpUrl("http://[fe80::1]:81");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->host, "fe80::1");
  EXPECT_EQ(u->port, 81);
  EXPECT_EQ(u->path, "/");

  u = ParseHttpUrl("http://10.0.0.1?q");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->host, "10.0.0.1");
  EXPECT_EQ(u->port, 80);
  EXPECT_EQ(u->path, "/?q");
  EXPECT_EQ(ParseHttpUrl("https://h").value().port, 443);
}

TEST(HttpUrlTest, RejectsWhatCannotBeSentAndSaysWhy) {
  const auto error = [](std::string_view url) { return ParseHttpUrl(url).status().message(); };
  EXPECT_THAT(error("ftp://h/"), HasSubstr("unsupported scheme \"ftp\""));
  EXPECT_THAT(error("h/x"), HasSubstr("missing scheme"));
  EXPECT_THAT(error("http:///x"), HasSubstr("invalid host"));
  EXPECT_THAT(error("http://a b/"), HasSubstr("invalid host"));
  EXPECT_THAT(error("http://[::1/"), HasSubstr("invalid host"));
  EXPECT_THAT(error("http://[::1]x/"), HasSubstr("invalid host"));
  EXPECT_THAT(error("http://h:0/"), HasSubstr("invalid port \"0\""));
  EXPECT_THAT(error("http://h:65536/"), HasSubstr("invalid port"));
  EXPECT_THAT(error("http://h:/"), HasSubstr("invalid port \"\""));
  EXPECT_THAT(error("http://h:1:2/"), HasSubstr("invalid port"));
  EXPECT_THAT(error("http://h/a b"), HasSubstr("space or a control character"));
  EXPECT_THAT(error("http://h/a\r\nX: y"), HasSubstr("space or a control character"));
  EXPECT_EQ(ParseHttpUrl("http://h/").status().code(), StatusCode::kOk);
}

TEST(HttpUrlTest, UserInfoIsRefusedAndNeverQuoted) {
  const Status s = ParseHttpUrl("https://admin:s3cret@example.com/hook").status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("url \"https://example.com/hook\": user info"));
  EXPECT_THAT(s.message(), Not(HasSubstr("s3cret")));
  EXPECT_EQ(RedactUrl("http://u:p@h:1/x@y"), "http://h:1/x@y");
  EXPECT_EQ(RedactUrl("http://h/x@y"), "http://h/x@y");
  EXPECT_EQ(RedactUrl("not a url"), "not a url");
}

}  // namespace
}  // namespace gnomon::net
