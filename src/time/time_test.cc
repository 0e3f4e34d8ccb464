#include "gnomon/time.h"

#include <gtest/gtest.h>

namespace gnomon {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;

TEST(InstantTest, FormatsRfc3339InUtc) {
  const Instant t = Instant::FromUnixMillis(1795987800000);  // 2026-11-29T21:30:00Z
  EXPECT_EQ(t.ToRfc3339(), "2026-11-29T21:30:00.000Z");
  EXPECT_EQ(t.ToRfc3339Seconds(), "2026-11-29T21:30:00Z");
  EXPECT_EQ((t + milliseconds(7)).ToRfc3339(), "2026-11-29T21:30:00.007Z");
  EXPECT_EQ(Instant::FromUnixMillis(-1).ToRfc3339(), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(Instant::FromUnixMillis(-1).unix_seconds(), -1);
}

TEST(InstantTest, ParsesOffsetsAndFractions) {
  Result<Instant> a = Instant::ParseRfc3339("2025-03-09T01:59:00-05:00");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->ToRfc3339Seconds(), "2025-03-09T06:59:00Z");
  Result<Instant> b = Instant::ParseRfc3339("2025-10-05T01:59:00+10:30");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->ToRfc3339Seconds(), "2025-10-04T15:29:00Z");
  Result<Instant> c = Instant::ParseRfc3339("2026-11-29T21:30:00.123456Z");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->ToRfc3339(), "2026-11-29T21:30:00.123Z");
  for (const char* bad :
       {"", "2026-11-29", "2026-13-01T00:00:00Z", "2026-02-29T00:00:00Z", "2026-11-29T24:00:00Z",
        "2026-11-29T21:30:00", "2026-11-29T21:30:00Zx", "2026-11-29T21:30:00+5"}) {
    EXPECT_FALSE(Instant::ParseRfc3339(bad).ok()) << bad;
  }
}

TEST(DurationTest, ParsesTheJobsFileGrammar) {
  EXPECT_EQ(*ParseDuration("500ms"), milliseconds(500));
  EXPECT_EQ(*ParseDuration("90s"), seconds(90));
  EXPECT_EQ(*ParseDuration("1h30m"), minutes(90));
  EXPECT_EQ(*ParseDuration("2d"), hours(48));
  EXPECT_EQ(*ParseDuration("1.5h"), minutes(90));
  EXPECT_EQ(*ParseDuration("7m13s"), seconds(433));
  for (const char* bad : {"", "-5s", "5", "s", "5x", "1..5s", "NaN", "nan", "1e9s", "40000d",
                          "99999999999999999999h"}) {
    EXPECT_FALSE(ParseDuration(bad).ok()) << bad;
  }
  EXPECT_NE(ParseDuration("-5s").status().message().find("negative"), std::string::npos);
}

TEST(DurationTest, FormatsLargestUnitsFirst) {
  EXPECT_EQ(FormatDuration(minutes(90)), "1h30m");
  EXPECT_EQ(FormatDuration(milliseconds(1500)), "1s500ms");
  EXPECT_EQ(FormatDuration(hours(48)), "2d");
  EXPECT_EQ(FormatDuration(Duration(0)), "0s");
}

TEST(CivilTest, CalendarHelpers) {
  EXPECT_TRUE(IsLeapYear(2024));
  EXPECT_FALSE(IsLeapYear(2100));
  EXPECT_TRUE(IsLeapYear(2000));
  EXPECT_EQ(DaysInMonth(2024, 2), 29);
  EXPECT_EQ(DaysInMonth(2025, 2), 28);
  EXPECT_EQ(Weekday(2026, 11, 29), 0);  // a Sunday
  EXPECT_EQ(AddSeconds(CivilTime{2024, 12, 31, 23, 59, 59}, 1), (CivilTime{2025, 1, 1, 0, 0, 0}));
  EXPECT_EQ(CivilSecondsSinceEpoch(CivilTime{1970, 1, 2, 0, 0, 0}), 86400);
  // Out-of-range fields are normalised: month 14 of 2024 is February 2025, day 0 its eve, …
  EXPECT_EQ(AddSeconds(CivilTime{2024, 14, 0, 25, 61, -1}, 0), (CivilTime{2025, 2, 1, 2, 0, 59}));
  EXPECT_EQ(AddSeconds(CivilTime{2024, -1, 31, 0, 0, 0}, 0), (CivilTime{2023, 12, 1, 0, 0, 0}));
}

// The O(1) calendar arithmetic agrees with the tz library's UTC conversion, far from 1970 too.
TEST(CivilTest, ArithmeticAgreesWithTheTzLibrary) {
  const TimeZone utc;
  int64_t checked = 0;
  for (int64_t s = -62135596800 * 2; s < int64_t{400} * 365 * 86400 * 30; s += 4999999) {
    const CivilTime c = utc.ToCivil(Instant::FromUnixSeconds(s));
    ASSERT_EQ(AddSeconds(CivilTime{}, s), c) << s;
    ASSERT_EQ(CivilSecondsSinceEpoch(c), s) << c.ToString();
    const int64_t day = s >= 0 ? s / 86400 : -((-s + 86399) / 86400);
    ASSERT_EQ(Weekday(c.year, c.month, c.day), ((day + 4) % 7 + 7) % 7) << c.ToString();
    ++checked;
  }
  EXPECT_GT(checked, 90000);
}

TEST(TimeZoneTest, RejectsUnknownAndHostileNames) {
  for (const char* bad : {"Mars/Olympus", "../../etc/passwd", "Europe/../../x", "/etc/localtime",
                          "Europe/Berlin\n", "", "Europe//Berlin", "./UTC"}) {
    Result<TimeZone> z = TimeZone::Load(bad);
    EXPECT_FALSE(z.ok()) << bad;
  }
  EXPECT_NE(TimeZone::Load("Mars/Olympus").status().message().find("Mars/Olympus"),
            std::string::npos);
}

TEST(TimeZoneTest, SpringForwardGapAndFallBackOverlap) {
  Result<TimeZone> ny = TimeZone::Load("America/New_York");
  ASSERT_TRUE(ny.ok()) << ny.status().ToString();
  const TimeZone::CivilLookup gap = ny->Lookup(CivilTime{2025, 3, 9, 2, 30, 0});
  EXPECT_EQ(gap.kind, TimeZone::CivilLookup::Kind::kSkipped);
  EXPECT_EQ(gap.trans.ToRfc3339Seconds(), "2025-03-09T07:00:00Z");
  const TimeZone::CivilLookup overlap = ny->Lookup(CivilTime{2025, 11, 2, 1, 30, 0});
  EXPECT_EQ(overlap.kind, TimeZone::CivilLookup::Kind::kRepeated);
  EXPECT_EQ(overlap.pre.ToRfc3339Seconds(), "2025-11-02T05:30:00Z");
  EXPECT_EQ(overlap.post.ToRfc3339Seconds(), "2025-11-02T06:30:00Z");

  const auto next = ny->NextTransition(*Instant::ParseRfc3339("2025-06-01T00:00:00Z"));
  ASSERT_TRUE(next.has_value());
  EXPECT_EQ(next->at.ToRfc3339Seconds(), "2025-11-02T06:00:00Z");
  EXPECT_EQ(next->from, (CivilTime{2025, 11, 2, 2, 0, 0}));
  EXPECT_EQ(next->to, (CivilTime{2025, 11, 2, 1, 0, 0}));
  const auto prev = ny->PrevTransition(next->at);
  ASSERT_TRUE(prev.has_value());
  EXPECT_EQ(prev->at, next->at) << "PrevTransition includes its argument";
  EXPECT_EQ(ny->FormatLocal(next->at), "2025-11-02T01:00:00-05:00");
  EXPECT_EQ(ny->UtcOffsetSeconds(next->at), -5 * 3600);
}

// SegmentAt agrees with the transitions and offsets around it, at and next to each edge.
TEST(TimeZoneTest, SegmentAtIsBoundedByTheTransitionsAroundIt) {
  for (const char* name : {"America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Tokyo",
                           "Pacific/Chatham", "America/Santiago"}) {
    Result<TimeZone> zone = TimeZone::Load(name);
    ASSERT_TRUE(zone.ok()) << zone.status().ToString();
    Instant t = *Instant::ParseRfc3339("2024-01-01T00:00:00Z");
    for (int i = 0; i < 8; ++i) {
      const std::optional<TimeZone::Transition> next = zone->NextTransition(t);
      for (const Instant probe : {t, t + seconds(1), next ? next->at - seconds(1) : t}) {
        const TimeZone::Segment seg = zone->SegmentAt(probe);
        const std::optional<TimeZone::Transition> prev = zone->PrevTransition(probe);
        EXPECT_EQ(seg.utc_offset_s, zone->UtcOffsetSeconds(probe)) << name;
        EXPECT_EQ(seg.start, prev ? prev->at : Instant::Min()) << name << " " << probe.ToRfc3339();
        EXPECT_EQ(seg.end, next ? next->at : Instant::Max()) << name << " " << probe.ToRfc3339();
      }
      if (!next) break;
      t = next->at;
    }
  }
  const TimeZone::Segment utc = TimeZone().SegmentAt(Instant());
  EXPECT_EQ(utc.start, Instant::Min());
  EXPECT_EQ(utc.end, Instant::Max());
  EXPECT_EQ(utc.utc_offset_s, 0);
}

TEST(TimeZoneTest, UtcHasNoTransitions) {
  TimeZone utc;
  EXPECT_EQ(utc.name(), "UTC");
  EXPECT_FALSE(utc.NextTransition(Instant()).has_value());
  EXPECT_EQ(utc.ToCivil(Instant::FromUnixSeconds(86399)), (CivilTime{1970, 1, 1, 23, 59, 59}));
}

}  // namespace
}  // namespace gnomon
