// The pure parts of the egress filter (gnomon/net.h): addresses, CIDR blocks, rules.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gnomon/net.h"

namespace gnomon::net {
namespace {

using ::testing::HasSubstr;

IpAddress Ip(std::string_view text) {
  const std::optional<IpAddress> ip = IpAddress::Parse(text);
  EXPECT_TRUE(ip.has_value()) << text;
  return ip.value_or(IpAddress());
}

Cidr Block(std::string_view text) {
  Result<Cidr> c = Cidr::Parse(text);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : Cidr();
}

TEST(IpAddressTest, ParsesLiteralsAndNothingElse) {
  EXPECT_TRUE(Ip("192.0.2.1").is_v4());
  EXPECT_EQ(Ip("192.0.2.1").ToString(), "192.0.2.1");
  EXPECT_FALSE(Ip("2001:db8::1").is_v4());
  EXPECT_EQ(Ip("2001:DB8:0::1").ToString(), "2001:db8::1");
  EXPECT_EQ(Ip("[::1]").ToString(), "::1");
  for (const char* bad :
       {"", "localhost", "1.2.3", "1.2.3.4.5", "256.1.1.1", "0x7f.0.0.1", "2852039166", "[1.2.3.4]",
        "::1%eth0", "1.2.3.4:80", " 1.2.3.4", "fe80::1::2"}) {
    EXPECT_FALSE(IpAddress::Parse(bad).has_value()) << bad;
  }
}

TEST(IpAddressTest, MappedIpv6IsTheIpv4Address) {
  const IpAddress mapped = Ip("::ffff:169.254.169.254");
  EXPECT_FALSE(mapped.is_v4());
  EXPECT_EQ(mapped.Unmapped(), Ip("169.254.169.254"));
  EXPECT_EQ(Ip("::1").Unmapped(), Ip("::1"));  // not mapped: unchanged
  EXPECT_EQ(Ip("10.0.0.1").Unmapped(), Ip("10.0.0.1"));
}

TEST(CidrTest, ParsesBlocksAndAddresses) {
  EXPECT_EQ(Block("10.0.0.0/8").ToString(), "10.0.0.0/8");
  EXPECT_EQ(Block("fe80::/10").ToString(), "fe80::/10");
  EXPECT_EQ(Block("192.0.2.7").ToString(), "192.0.2.7/32");
  EXPECT_EQ(Block("2001:db8::7").ToString(), "2001:db8::7/128");
  EXPECT_EQ(Block("0.0.0.0/0").ToString(), "0.0.0.0/0");
  EXPECT_EQ(Block("::/0").ToString(), "::/0");
  // An IPv4-mapped block is the IPv4 block.
  EXPECT_EQ(Block("::ffff:10.0.0.0/104").ToString(), "10.0.0.0/8");
}

TEST(CidrTest, ErrorsSayWhatIsWrong) {
  EXPECT_THAT(Cidr::Parse("10.0.0.0/33").status().message(),
              HasSubstr("\"10.0.0.0/33\": prefix length 33 is out of range 0-32"));
  EXPECT_THAT(Cidr::Parse("fe80::/129").status().message(),
              HasSubstr("prefix length 129 is out of range 0-128"));
  EXPECT_THAT(Cidr::Parse("10.0.0.1/8").status().message(),
              HasSubstr("host bits are set (the block is 10.0.0.0/8)"));
  EXPECT_THAT(Cidr::Parse("fe80::1/10").status().message(),
              HasSubstr("host bits are set (the block is fe80::/10)"));
  EXPECT_THAT(Cidr::Parse("example.com/8").status().message(),
              HasSubstr("\"example.com\" is not an IP address"));
  EXPECT_THAT(Cidr::Parse("10.0.0.0/").status().message(), HasSubstr("is not a number"));
  EXPECT_THAT(Cidr::Parse("10.0.0.0/-1").status().message(), HasSubstr("-1 is out of range"));
  EXPECT_THAT(Cidr::Parse("10.0.0.0/8x").status().message(), HasSubstr("is not a number"));
  EXPECT_EQ(Cidr::Parse("").status().code(), StatusCode::kInvalidArgument);
}

TEST(CidrTest, ContainsAtEveryBoundary) {
  const Cidr ten = Block("10.0.0.0/8");
  EXPECT_TRUE(ten.Contains(Ip("10.0.0.0")));
  EXPECT_TRUE(ten.Contains(Ip("10.255.255.255")));
  EXPECT_FALSE(ten.Contains(Ip("11.0.0.0")));
  EXPECT_FALSE(ten.Contains(Ip("9.255.255.255")));
  const Cidr odd = Block("172.16.0.0/12");  // a prefix that is not a whole number of bytes
  EXPECT_TRUE(odd.Contains(Ip("172.31.255.255")));
  EXPECT_FALSE(odd.Contains(Ip("172.32.0.0")));
  EXPECT_FALSE(odd.Contains(Ip("172.15.255.255")));
  const Cidr link_local6 = Block("fe80::/10");
  EXPECT_TRUE(link_local6.Contains(Ip("fe80::1")));
  EXPECT_TRUE(link_local6.Contains(Ip("febf:ffff::1")));
  EXPECT_FALSE(link_local6.Contains(Ip("fec0::1")));
  EXPECT_TRUE(Block("0.0.0.0/0").Contains(Ip("203.0.113.9")));
  EXPECT_TRUE(Block("192.0.2.7").Contains(Ip("192.0.2.7")));
  EXPECT_FALSE(Block("192.0.2.7").Contains(Ip("192.0.2.6")));
  // Never across families: an IPv4 block does not hold an IPv6 address, and ::/0 holds no IPv4.
  EXPECT_FALSE(Block("0.0.0.0/0").Contains(Ip("::1")));
  EXPECT_FALSE(Block("::/0").Contains(Ip("127.0.0.1")));
}

TEST(EgressRuleTest, DefaultDeniesLinkLocalOnly) {
  const EgressRule rule = EgressRule::Default();
  EXPECT_EQ(CheckEgress(rule, "169.254.169.254").message(),
            "egress: 169.254.169.254 is denied by egress_deny 169.254.0.0/16");
  EXPECT_EQ(CheckEgress(rule, "169.254.169.254").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(CheckEgress(rule, "[fe80::1]").message(),
            "egress: fe80::1 is denied by egress_deny fe80::/10");
  EXPECT_TRUE(CheckEgress(rule, "127.0.0.1").ok());
  EXPECT_TRUE(CheckEgress(rule, "10.1.2.3").ok());
  EXPECT_TRUE(CheckEgress(rule, "::1").ok());
  EXPECT_TRUE(CheckEgress(rule, "169.255.0.1").ok());
}

TEST(EgressRuleTest, MappedAddressesCannotSlipPast) {
  EXPECT_EQ(CheckEgress(EgressRule::Default(), "::ffff:169.254.169.254").message(),
            "egress: 169.254.169.254 is denied by egress_deny 169.254.0.0/16");
  Result<EgressRule> allow_ten = EgressRule::Parse({"10.0.0.0/8"}, {});
  ASSERT_TRUE(allow_ten.ok());
  EXPECT_TRUE(CheckEgress(*allow_ten, "::ffff:10.0.0.1").ok());
}

TEST(EgressRuleTest, DenyWinsOverAllow) {
  Result<EgressRule> rule = EgressRule::Parse({"10.0.0.0/8"}, {"10.1.0.0/16"});
  ASSERT_TRUE(rule.ok()) << rule.status().ToString();
  EXPECT_TRUE(CheckEgress(*rule, "10.2.0.1").ok());
  EXPECT_EQ(CheckEgress(*rule, "10.1.0.1").message(),
            "egress: 10.1.0.1 is denied by egress_deny 10.1.0.0/16");
  // A deny entry wins even when the allow entry is the narrower one.
  Result<EgressRule> narrow = EgressRule::Parse({"10.1.2.3"}, {"10.0.0.0/8"});
  ASSERT_TRUE(narrow.ok());
  EXPECT_EQ(CheckEgress(*narrow, "10.1.2.3").message(),
            "egress: 10.1.2.3 is denied by egress_deny 10.0.0.0/8");
}

TEST(EgressRuleTest, AnAllowListRefusesEverythingElse) {
  Result<EgressRule> rule = EgressRule::Parse({"10.0.0.0/8", "fd00::/8"}, {});
  ASSERT_TRUE(rule.ok());
  EXPECT_TRUE(CheckEgress(*rule, "10.9.9.9").ok());
  EXPECT_TRUE(CheckEgress(*rule, "fd12::1").ok());
  EXPECT_EQ(CheckEgress(*rule, "192.0.2.1").message(),
            "egress: 192.0.2.1 is not in egress_allow (10.0.0.0/8, fd00::/8)");
  EXPECT_FALSE(CheckEgress(*rule, "::1").ok());
}

TEST(EgressRuleTest, EmptyAllowListAllowsWhatIsNotDenied) {
  Result<EgressRule> rule = EgressRule::Parse({}, {"127.0.0.0/8"});
  ASSERT_TRUE(rule.ok());
  EXPECT_TRUE(CheckEgress(*rule, "192.0.2.1").ok());
  EXPECT_EQ(CheckEgress(*rule, "127.0.0.1").message(),
            "egress: 127.0.0.1 is denied by egress_deny 127.0.0.0/8");
  EXPECT_TRUE(CheckEgress(EgressRule{}, "169.254.169.254").ok());  // an empty rule allows all
}

TEST(EgressRuleTest, ParseTakesTheListsAsGiven) {
  // A deny list replaces the built-in one: link-local is denied only when listed.
  Result<EgressRule> rule = EgressRule::Parse({}, {"10.0.0.0/8"});
  ASSERT_TRUE(rule.ok());
  EXPECT_TRUE(CheckEgress(*rule, "169.254.169.254").ok());
  rule = EgressRule::Parse({}, {"169.254.0.0/16", "fe80::/10", "10.0.0.0/8", "fe80::/10"});
  ASSERT_TRUE(rule.ok());
  EXPECT_EQ(rule->deny.size(), 3u);  // the repeated entry is kept once
  EXPECT_FALSE(CheckEgress(*rule, "169.254.169.254").ok());
  rule = EgressRule::Parse({}, {});
  ASSERT_TRUE(rule.ok());
  EXPECT_TRUE(rule->allow.empty());
  EXPECT_TRUE(rule->deny.empty());
}

TEST(EgressRuleTest, ParseErrorsNameTheEntry) {
  EXPECT_EQ(EgressRule::Parse({"10.0.0.0/8"}, {"192.0.2.0/24", "10.0.0.0/33"}).status().message(),
            "egress_deny[1]: \"10.0.0.0/33\": prefix length 33 is out of range 0-32");
  EXPECT_EQ(EgressRule::Parse({"fe80::1/10"}, {}).status().message(),
            "egress_allow[0]: \"fe80::1/10\": host bits are set (the block is fe80::/10)");
}

TEST(EgressRuleTest, CheckingAHostNameIsAnError) {
  const Status s = CheckEgress(EgressRule::Default(), "metadata.google.internal");
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("is not an IP address"));
}

}  // namespace
}  // namespace gnomon::net
