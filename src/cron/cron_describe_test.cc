#include <gtest/gtest.h>

#include "gnomon/cron.h"

namespace gnomon {
namespace {

std::string D(const char* text) {
  Result<CronExpr> e = CronExpr::Parse(text);
  return e.ok() ? e->Describe() : "error: " + e.status().message();
}

TEST(CronDescribeTest, ReadsLikeASentence) {
  EXPECT_EQ(D("30 2 * * *"), "At 02:30, every day");
  EXPECT_EQ(D("* * * * *"), "Every minute");
  EXPECT_EQ(D("*/15 * * * *"), "Every 15 minutes");
  EXPECT_EQ(D("0,15,30,45 * * * *"), "Every 15 minutes");
  EXPECT_EQ(D("0 * * * *"), "Every hour");
  EXPECT_EQ(D("0 9-17 * * MON-FRI"),
            "At minute 0 past the hour, between 09:00 and 17:59, on Monday through Friday");
  EXPECT_EQ(D("0 0 2 1 * *"), "At 02:00, on day 1 of the month");
  EXPECT_EQ(D("0 0 L * *"), "At 00:00, on the last day of the month");
  EXPECT_EQ(D("0 0 * * 5#L"), "At 00:00, on the last Friday of the month");
  EXPECT_EQ(D("0 0 * * 1#1"), "At 00:00, on the first Monday of the month");
  EXPECT_EQ(D("0 0 13 * 5"), "At 00:00, on day 13 of the month or on Friday");
  EXPECT_EQ(D("0 0 1 1,7 *"), "At 00:00, on day 1 of the month, in January and July");
  EXPECT_EQ(D("*/10 * * * * *"), "Every 10 seconds");
  EXPECT_EQ(D("@every 90s"), "Every 1m30s, at whole multiples of it since the Unix epoch");
  EXPECT_EQ(D("CRON_TZ=Asia/Shanghai 0 0 2 1 * *"),
            "At 02:00, on day 1 of the month (Asia/Shanghai time)");
  EXPECT_EQ(D("0 0 0 1 1 * 2030"), "At 00:00, on day 1 of the month, in January, in 2030");
}

}  // namespace
}  // namespace gnomon
