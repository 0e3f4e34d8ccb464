#include "gnomon/status.h"

#include <gtest/gtest.h>

#include <string>

namespace gnomon {
namespace {

TEST(StatusTest, DefaultIsOk) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.ToString(), "OK");
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = InvalidArgumentError("hour: 25 is out of range 0-23");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.ToString(), "InvalidArgument: hour: 25 is out of range 0-23");
  EXPECT_EQ(s.WithPrefix("jobs.toml:12").message(), "jobs.toml:12: hour: 25 is out of range 0-23");
}

TEST(ResultTest, HoldsValueOrStatus) {
  Result<std::string> good = std::string("x");
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(*good, "x");
  Result<std::string> bad = NotFoundError("no such job");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
}

TEST(ResultDeathTest, ValueOfErrorAborts) {
  Result<int> bad = InternalError("boom");
  EXPECT_DEATH((void)bad.value(), "boom");
}

}  // namespace
}  // namespace gnomon
