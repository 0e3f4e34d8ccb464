#include "gnomon/fire_rules.h"

#include <gtest/gtest.h>

#include <set>

#include "gnomon/job.h"

namespace gnomon {
namespace {

Instant At(const char* rfc3339) { return *Instant::ParseRfc3339(rfc3339); }

// The job's FireRulesSpec to set keys of (created when unset).
inline FireRulesSpec& Rules(JobSpec& j) {
  return j.fire_rules ? *j.fire_rules : j.fire_rules.emplace();
}

JobSpec Job(const std::string& schedule, const std::string& zone = "UTC") {
  JobSpec j;
  j.id = "rules";
  j.schedule = schedule;
  j.timezone = zone;
  j.command = "true";
  return j;
}

CompiledJob Compile(const JobSpec& j, const Calendars* calendars = nullptr) {
  Result<CompiledJob> c = CompileJob(j, calendars);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

std::vector<std::string> Fires(const CompiledJob& c, Instant after, int n) {
  std::vector<std::string> out;
  for (std::optional<Instant> f = after; out.size() < static_cast<size_t>(n);) {
    f = NextFire(*c.schedule, c.rules.get(), *f);
    if (!f) break;
    out.push_back(c.schedule->time_zone().FormatLocal(*f));
  }
  return out;
}

TEST(ExcludeEntry, DatesRangesAndCronExpressions) {
  Result<ExcludeEntry> day = ParseExcludeEntry("2026-12-25");
  ASSERT_TRUE(day.ok());
  EXPECT_EQ(day->first_day, day->last_day);
  Result<ExcludeEntry> range = ParseExcludeEntry("2026-12-24/2026-12-26");
  ASSERT_TRUE(range.ok());
  EXPECT_EQ(range->last_day - range->first_day, 2);
  Result<ExcludeEntry> cron = ParseExcludeEntry("* * * * 0,6");
  ASSERT_TRUE(cron.ok());
  EXPECT_EQ(cron->cron, "* * * * 0,6");
  for (const char* bad : {"", "2026-02-30", "2026-12-26/2026-12-24", "2026-13-01", "not a date",
                          "2026-12-24/2026-12-2x"}) {
    Result<ExcludeEntry> e = ParseExcludeEntry(bad);
    EXPECT_FALSE(e.ok()) << bad;
  }
  EXPECT_NE(ParseExcludeEntry("2026-02-30").status().message().find("is not a date"),
            std::string::npos);
}

TEST(FireRules, NoRulesCostNothing) {
  const CompiledJob c = Compile(Job("0 0 * * * *"));
  EXPECT_EQ(c.rules, nullptr);
}

TEST(FireRules, ExcludedDatesAndRangesAreSkippedInTheJobsZone) {
  JobSpec j = Job("0 0 9 * * *", "America/New_York");
  Rules(j).exclude = {"2026-12-25", "2026-12-31/2027-01-01"};
  const CompiledJob c = Compile(j);
  EXPECT_EQ(Fires(c, At("2026-12-23T15:00:00Z"), 5),
            (std::vector<std::string>{"2026-12-24T09:00:00-05:00", "2026-12-26T09:00:00-05:00",
                                      "2026-12-27T09:00:00-05:00", "2026-12-28T09:00:00-05:00",
                                      "2026-12-29T09:00:00-05:00"}));
  EXPECT_EQ(Fires(c, At("2026-12-30T15:00:00Z"), 2),
            (std::vector<std::string>{"2027-01-02T09:00:00-05:00", "2027-01-03T09:00:00-05:00"}));
  // 2026-12-25 09:00 in New York is 14:00Z on the 25th; 23:30 on the 24th in New York is the
  // 25th in UTC and is not excluded.
  JobSpec late = Job("0 30 23 * * *", "America/New_York");
  Rules(late).exclude = {"2026-12-25"};
  const CompiledJob lc = Compile(late);
  EXPECT_TRUE(lc.rules->Allows(At("2026-12-25T04:30:00Z")));
  EXPECT_FALSE(lc.rules->Allows(At("2026-12-26T04:30:00Z")));
  // Prev skips the same.
  EXPECT_EQ(PrevFire(*c.schedule, c.rules.get(), At("2027-01-02T00:00:00Z")),
            At("2026-12-30T14:00:00Z"));
}

TEST(FireRules, CronExclusionsMatchInTheJobsZone) {
  // Every hour at :00 on weekdays, excluding 12:00-13:59 local (lunch) and weekends.
  JobSpec j = Job("0 0 * * * *", "Asia/Shanghai");
  Rules(j).exclude = {"0 0 12-13 * * *", "* * * * 0,6"};
  const CompiledJob c = Compile(j);
  // 2026-12-04 is a Friday.
  const std::vector<std::string> fires = Fires(c, At("2026-12-04T02:30:00Z"), 14);  // 10:30 local
  ASSERT_EQ(fires.size(), 14u);
  EXPECT_EQ(fires[0], "2026-12-04T11:00:00+08:00");
  EXPECT_EQ(fires[1], "2026-12-04T14:00:00+08:00");
  EXPECT_EQ(fires[10], "2026-12-04T23:00:00+08:00");
  EXPECT_EQ(fires[11], "2026-12-07T00:00:00+08:00") << "Saturday and Sunday excluded";
}

TEST(FireRules, WindowAndMaxRunsCountAllowedFires) {
  JobSpec j = Job("0 0 0 * * *");
  Rules(j).start_at = At("2026-12-01T00:00:00Z");
  Rules(j).max_runs = 3;
  Rules(j).exclude = {"2026-12-02"};
  const CompiledJob c = Compile(j);
  EXPECT_EQ(Fires(c, At("2026-11-01T00:00:00Z"), 10),
            (std::vector<std::string>{"2026-12-01T00:00:00+00:00", "2026-12-03T00:00:00+00:00",
                                      "2026-12-04T00:00:00+00:00"}));
  EXPECT_EQ(c.rules->WindowAt(At("2026-11-30T00:00:00Z")), FireRules::Window::kNotStarted);
  EXPECT_EQ(c.rules->WindowAt(At("2026-12-02T00:00:00Z")), FireRules::Window::kOpen);
  EXPECT_EQ(c.rules->WindowAt(At("2026-12-04T00:00:01Z")), FireRules::Window::kEnded);
  EXPECT_EQ(PrevFire(*c.schedule, c.rules.get(), At("2027-01-01T00:00:00Z")),
            At("2026-12-04T00:00:00Z"));
  EXPECT_EQ(PrevFire(*c.schedule, c.rules.get(), At("2026-12-01T00:00:00Z")), std::nullopt);

  JobSpec until = Job("0 0 0 * * *");
  Rules(until).end_at = At("2026-12-02T00:00:00Z");
  const CompiledJob u = Compile(until);
  EXPECT_EQ(Fires(u, At("2026-11-30T12:00:00Z"), 5),
            (std::vector<std::string>{"2026-12-01T00:00:00+00:00", "2026-12-02T00:00:00+00:00"}))
      << "end_at is included";
}

TEST(FireRules, ErrorsNameTheKey) {
  auto error = [](const JobSpec& j, const Calendars* cal = nullptr) {
    Result<CompiledJob> c = CompileJob(j, cal);
    return c.ok() ? std::string() : std::string(c.status().message());
  };
  JobSpec j = Job("0 0 0 * * *");
  Rules(j).max_runs = 2;
  EXPECT_EQ(error(j), "job \"rules\": max_runs: needs start_at (the fires are counted from it)");
  j = Job("0 0 0 * * *");
  Rules(j).start_at = At("2027-01-02T00:00:00Z");
  Rules(j).end_at = At("2027-01-01T00:00:00Z");
  EXPECT_EQ(error(j), "job \"rules\": end_at: is before start_at");
  j = Job("0 0 0 * * *");
  Rules(j).exclude = {"2026-12-25", "2026-12-32"};
  EXPECT_NE(error(j).find("exclude[1]: \"2026-12-32\" is not a date"), std::string::npos)
      << error(j);
  j = Job("0 0 0 * * *");
  Rules(j).jitter = std::chrono::hours(2);
  EXPECT_NE(error(j).find("jitter: 2h is out of range 0s to 1h"), std::string::npos) << error(j);
  j = Job("0 0 0 * * *");
  Rules(j).max_runs = kMaxRuns + 1;
  Rules(j).start_at = At("2027-01-01T00:00:00Z");
  EXPECT_NE(error(j).find("max_runs: 100001 is out of range"), std::string::npos) << error(j);
  j = Job("0 0 0 * * *");
  Rules(j).calendars = {"cn-holidays"};
  EXPECT_EQ(error(j),
            "job \"rules\": calendars[0]: \"cn-holidays\" is not defined (a [[calendar]] of the "
            "daemon's config)");
}

TEST(FireRules, NamedCalendarsAreExpandedInTheJobsZone) {
  Calendars cals;
  ASSERT_TRUE(cals.Add({"cn-holidays", {"2026-10-01/2026-10-07", "2027-01-01"}, "t.toml:1"}).ok());
  ASSERT_TRUE(cals.Add({"weekends", {"* * * * * 0,6"}, "t.toml:5"}).ok());
  Status dup = cals.Add({"weekends", {}, "t.toml:9"});
  EXPECT_EQ(dup.message(), "calendar \"weekends\": duplicate id, first defined at t.toml:5");
  Status bad = cals.Add({"bad", {"2026-01-01", "yesterday"}, "t.toml:12"});
  EXPECT_NE(bad.message().find("calendar \"bad\": dates[1]: \"yesterday\""), std::string::npos)
      << bad.message();
  JobSpec j = Job("0 0 2 * * *", "Asia/Shanghai");
  Rules(j).calendars = {"cn-holidays", "weekends"};
  const CompiledJob c = Compile(j, &cals);
  // 2026-09-30 is a Wednesday; Oct 1-7 are holidays, Oct 10-11 a weekend.
  EXPECT_EQ(Fires(c, At("2026-09-29T00:00:00Z"), 4),
            (std::vector<std::string>{"2026-09-30T02:00:00+08:00", "2026-10-08T02:00:00+08:00",
                                      "2026-10-09T02:00:00+08:00", "2026-10-12T02:00:00+08:00"}));
}

TEST(FireRules, AnExclusionOfEveryFireEndsTheSearch) {
  JobSpec j = Job("* * * * * *");
  Rules(j).exclude = {"* * * * * *"};
  const CompiledJob c = Compile(j);
  EXPECT_EQ(NextFire(*c.schedule, c.rules.get(), At("2026-12-01T00:00:00Z")), std::nullopt);
}

TEST(Jitter, TheOffsetIsAFunctionOfTheJobAndTheInstant) {
  JobSpec j = Job("0 * * * * *");
  Rules(j).jitter = std::chrono::minutes(5);
  std::set<int64_t> offsets;
  for (int i = 0; i < 1000; ++i) {
    const Instant t = At("2026-12-01T00:00:00Z") + std::chrono::minutes(i);
    const Duration d = JitterOffset(j, t);
    ASSERT_GE(d, Duration(0));
    ASSERT_LT(d, FireRulesOf(j).jitter);
    EXPECT_EQ(d, JitterOffset(j, t)) << "the same on every call";
    EXPECT_EQ(DueAt(j, t), t + d);
    offsets.insert(d.count() / 30'000);  // which 30 s tenth of the jitter
  }
  EXPECT_EQ(offsets.size(), 10u) << "offsets spread over the whole jitter";
  JobSpec other = j;
  other.id = "other";
  int same = 0;
  for (int i = 0; i < 100; ++i) {
    const Instant t = At("2026-12-01T00:00:00Z") + std::chrono::minutes(i);
    same += JitterOffset(j, t) == JitterOffset(other, t);
  }
  EXPECT_LT(same, 5) << "another job has other offsets";
  Rules(j).jitter = Duration(0);
  EXPECT_EQ(JitterOffset(j, At("2026-12-01T00:00:00Z")), Duration(0));
}

}  // namespace
}  // namespace gnomon
