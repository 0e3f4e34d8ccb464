// Parser errors (field, text, column), limits and hostile inputs; dialect corners not in vectors.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "gnomon/cron.h"

namespace gnomon {
namespace {

std::string ErrorOf(std::string_view text) {
  Result<CronExpr> e = CronExpr::Parse(text);
  return e.ok() ? "<parsed>" : e.status().message();
}

Instant T(const char* rfc3339) { return *Instant::ParseRfc3339(rfc3339); }

TEST(CronParserTest, ErrorsNameFieldTextAndColumn) {
  EXPECT_EQ(ErrorOf("0 25 * * *"), "hour: 25 is out of range 0-23 (column 3)");
  EXPECT_EQ(ErrorOf("0 0 25 * * *"), "hour: 25 is out of range 0-23 (column 5)");
  EXPECT_EQ(ErrorOf("*/0 * * * *"), "minute: step 0 is not allowed (column 3)");
  EXPECT_EQ(ErrorOf("5-1 * * * *"),
            "minute: range 5-1 is reversed (wrap-around ranges are not supported) (column 1)");
  EXPECT_EQ(ErrorOf("1,,2 * * * *"), "minute: empty list item (column 3)");
  EXPECT_EQ(ErrorOf("/5 * * * *"), "minute: unexpected /5 (column 1)");
  EXPECT_EQ(ErrorOf("* * * * MONDAY"), "day-of-week: unknown name MONDAY (use SUN-SAT) (column 9)");
  EXPECT_EQ(ErrorOf("* * * *"), "expected 5, 6 or 7 fields, found 4");
  EXPECT_EQ(ErrorOf(""), "expression is empty");
  EXPECT_EQ(ErrorOf("@reboot").substr(0, 31), "expression: unknown macro @rebo");
  EXPECT_EQ(ErrorOf("0 0 * * 1#6"), "day-of-week: #6 must be #1 to #5 or #L (column 11)");
  // Found by the fuzzer: "7/1" started past the day-of-week range and matched nothing.
  EXPECT_EQ(ErrorOf("0 0 * * 7/1"),
            "day-of-week: 7/1 starts after the end of the range 0-6 (column 9)");
}

TEST(CronParserTest, HostileInputIsRejectedWithPosition) {
  EXPECT_NE(ErrorOf(std::string(1 << 20, '*')).find("limit is 1024"), std::string::npos);
  std::string items = "0";
  for (int i = 0; i < 10000; ++i) items += ",0";
  EXPECT_NE(ErrorOf(items + " * * * *").find("characters long"), std::string::npos);
  std::string many = "1";
  for (int i = 0; i < 300; ++i) many += ",1";
  EXPECT_NE(ErrorOf(many + " * * * *").find("list items; the limit is 256"), std::string::npos);
  EXPECT_EQ(ErrorOf("*/4294967296 * * * *"), "minute: step 4294967296 is too large (column 3)");
  EXPECT_EQ(ErrorOf("99999999999999999999 * * * *"),
            "minute: 99999999999999999999 is out of range 0-59 (column 1)");
  EXPECT_EQ(ErrorOf("0\t0 * * *"),
            "expression: tab is not a field separator (use spaces) (column 2)");
  EXPECT_EQ(ErrorOf(std::string("0 0\0 * * *", 10)), "expression: control character (column 4)");
  EXPECT_EQ(ErrorOf("\xd9\xa3 * * * *"), "expression: non-ASCII character (column 1)");  // Arabic 3
  EXPECT_EQ(ErrorOf("CRON_TZ=../../etc/passwd 0 0 * * *").substr(0, 34),
            "time zone: unknown time zone \"../.");
  EXPECT_NE(ErrorOf("TZ=Mars/Olympus 0 0 * * *").find("Mars/Olympus"), std::string::npos);
  EXPECT_EQ(ErrorOf("@every 0s"),
            "@every: 0s is not a whole number of seconds of at least 1s (column 8)");
  EXPECT_EQ(ErrorOf("@every 1500ms"),
            "@every: 1500ms is not a whole number of seconds of at least 1s (column 8)");
  EXPECT_NE(ErrorOf("@every -5s").find("negative"), std::string::npos);
}

TEST(CronParserTest, ParsingIsLinearInTheInput) {
  // The largest accepted input parses quickly; a quadratic parser would still pass at this size,
  // so this checks the limits hold rather than timing (timing belongs in make bench).
  std::string big = "0";
  for (int i = 1; i < 255; ++i) big += "," + std::to_string(i % 60);
  Result<CronExpr> e = CronExpr::Parse(big + " * * * *");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->fields().minutes.count(), 60u);
}

TEST(CronParserTest, PrefixSetsTheZone) {
  Result<CronExpr> e = CronExpr::Parse("CRON_TZ=Asia/Shanghai 0 0 2 1 * *");
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->time_zone().name(), "Asia/Shanghai");
  EXPECT_EQ(e->Next(T("2026-01-15T00:00:00Z"))->ToRfc3339Seconds(), "2026-01-31T18:00:00Z");
  Result<CronExpr> tz = CronExpr::Parse("TZ=Europe/Berlin 30 9 * * *");
  ASSERT_TRUE(tz.ok());
  EXPECT_EQ(tz->time_zone().name(), "Europe/Berlin");
}

TEST(CronParserTest, MacrosAreCaseInsensitive) {
  for (const char* m : {"@DAILY", "@Daily", "@midnight", "@MIDNIGHT"}) {
    Result<CronExpr> e = CronExpr::Parse(m);
    ASSERT_TRUE(e.ok()) << m;
    EXPECT_EQ(e->Next(T("2026-01-01T10:00:00Z"))->ToRfc3339Seconds(), "2026-01-02T00:00:00Z");
  }
  Result<CronExpr> every = CronExpr::Parse("@EVERY 1h30m");
  ASSERT_TRUE(every.ok());
  EXPECT_TRUE(every->is_interval());
  EXPECT_EQ(every->Next(T("1970-01-01T00:00:00Z"))->ToRfc3339Seconds(), "1970-01-01T01:30:00Z");
}

TEST(CronParserTest, HashIsStablePerJobAndSpreadsJobs) {
  CronOptions a{TimeZone(), "nightly-report"};
  Result<CronExpr> e1 = CronExpr::Parse("H H * * *", a);
  Result<CronExpr> e2 = CronExpr::Parse("H H * * *", a);
  ASSERT_TRUE(e1.ok() && e2.ok());
  EXPECT_EQ(e1->fields().minutes, e2->fields().minutes);
  EXPECT_EQ(e1->fields().minutes.count(), 1u);
  EXPECT_EQ(e1->fields().hours.count(), 1u);
  EXPECT_TRUE(e1->is_fixed_time());
  // Over many job ids, H takes many different minutes.
  std::bitset<60> seen;
  for (int i = 0; i < 200; ++i) {
    Result<CronExpr> e =
        CronExpr::Parse("H * * * *", CronOptions{TimeZone(), "job-" + std::to_string(i)});
    ASSERT_TRUE(e.ok());
    seen |= e->fields().minutes;
  }
  EXPECT_GT(seen.count(), 40u);
  Result<CronExpr> stepped = CronExpr::Parse("H/15 * * * *", a);
  ASSERT_TRUE(stepped.ok());
  EXPECT_EQ(stepped->fields().minutes.count(), 4u);
  Result<CronExpr> ranged = CronExpr::Parse("0 H(2-5) * * *", a);
  ASSERT_TRUE(ranged.ok());
  const int hour = std::countr_zero(ranged->fields().hours.to_ulong());
  EXPECT_GE(hour, 2);
  EXPECT_LE(hour, 5);
}

TEST(CronParserTest, ImpossibleScheduleIsValidAndNeverFires) {
  Result<CronExpr> e = CronExpr::Parse("0 0 30 2 *");
  ASSERT_TRUE(e.ok());
  EXPECT_FALSE(e->Next(T("2026-01-01T00:00:00Z")).has_value());
  EXPECT_FALSE(e->Prev(T("2026-01-01T00:00:00Z")).has_value());
  Result<CronExpr> never = CronExpr::Parse("0 0 0 1 1 * 2020");
  ASSERT_TRUE(never.ok());
  EXPECT_FALSE(never->Next(T("2026-01-01T00:00:00Z")).has_value());
  EXPECT_EQ(never->Prev(T("2026-01-01T00:00:00Z"))->ToRfc3339Seconds(), "2020-01-01T00:00:00Z");
}

TEST(CronParserTest, FixedTimeMeansOneValueInSecondMinuteHour) {
  EXPECT_TRUE(CronExpr::Parse("30 2 * * *")->is_fixed_time());
  EXPECT_TRUE(CronExpr::Parse("@daily")->is_fixed_time());
  EXPECT_FALSE(CronExpr::Parse("0,30 2 * * *")->is_fixed_time());
  EXPECT_FALSE(CronExpr::Parse("* 2 * * *")->is_fixed_time());
  EXPECT_FALSE(CronExpr::Parse("*/5 30 2 * * *")->is_fixed_time());
}

}  // namespace
}  // namespace gnomon
