// Property tests over thousands of random valid expressions and instants, in UTC and DST zones:
//   Next(t) > t, Matches(Next(t)), Prev(Next(t)) <= t, Prev(t) < t, Matches(Prev(t)),
//   and no fire skipped between t and Next(t), checked against an independent brute-force oracle
//   (a naive per-second reading of the fields and the DST rule) on a sample.
#include <gtest/gtest.h>

#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gnomon/cron.h"

namespace gnomon {
namespace {

class RandomCron {
 public:
  explicit RandomCron(uint64_t seed) : rng_(seed) {}

  std::string Expression() {
    const int shape = Uniform(0, 9);
    std::string out;
    if (shape >= 6) out += Field(0, 59) + " ";  // 6 or 7 fields: seconds first
    out += Field(0, 59) + " " + Field(0, 23) + " " + DomField() + " " + Field(1, 12) + " " +
           DowField();
    if (shape == 9) out += " " + YearField();
    return out;
  }

  int Uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  int64_t Uniform64(int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng_);
  }

 private:
  std::string Field(int lo, int hi) {
    switch (Uniform(0, 9)) {
      case 0:
      case 1:
        return "*";
      case 2:
      case 3:
        return std::to_string(Uniform(lo, hi));
      case 4: {
        const int a = Uniform(lo, hi);
        return std::to_string(a) + "-" + std::to_string(Uniform(a, hi));
      }
      case 5:
        return "*/" + std::to_string(Uniform(1, (hi - lo) / 2 + 1));
      case 6: {
        const int a = Uniform(lo, hi);
        return std::to_string(a) + "-" + std::to_string(Uniform(a, hi)) + "/" +
               std::to_string(Uniform(1, 7));
      }
      case 7:
        return std::to_string(Uniform(lo, hi)) + "/" + std::to_string(Uniform(1, 20));
      default:
        return std::to_string(Uniform(lo, hi)) + "," + std::to_string(Uniform(lo, hi)) + "," +
               std::to_string(Uniform(lo, hi));
    }
  }
  std::string DomField() {
    switch (Uniform(0, 12)) {
      case 0:
        return "L";
      case 1:
        return "LW";
      case 2:
        return std::to_string(Uniform(1, 31)) + "W";
      case 3:
        return "?";
      default:
        return Field(1, 31);
    }
  }
  std::string DowField() {
    switch (Uniform(0, 12)) {
      case 0:
        return std::to_string(Uniform(0, 7)) + "#" + std::to_string(Uniform(1, 5));
      case 1:
        return std::to_string(Uniform(0, 7)) + "L";
      case 2:
        return "?";
      case 3:
        return "MON-FRI";
      default:
        return Field(0, 6);
    }
  }
  std::string YearField() {
    const int a = Uniform(2018, 2035);
    return Uniform(0, 1) ? std::to_string(a) : std::to_string(a) + "-" + std::to_string(a + 3);
  }

  std::mt19937_64 rng_;
};

// The independent oracle: a direct reading of docs/semantics.md's rules, one instant at a time.
class Oracle {
 public:
  explicit Oracle(const CronExpr& e) : e_(e), f_(e.fields()), zone_(e.time_zone()) {}

  bool Fires(int64_t unix_s) const {
    const Instant x = Instant::FromUnixSeconds(unix_s);
    const CivilTime c = zone_.ToCivil(x);
    const bool civil_ok = CivilOk(c);
    if (!e_.is_fixed_time()) return civil_ok;
    if (civil_ok) return zone_.Lookup(c).pre == x;  // first occurrence only
    // End of a spring-forward gap whose skipped wall times include a match.
    const int before = zone_.UtcOffsetSeconds(Instant::FromUnixSeconds(unix_s - 1));
    const int after = zone_.UtcOffsetSeconds(x);
    if (after <= before) return false;
    const CivilTime gap_start = zone_.ToCivil(Instant::FromUnixSeconds(unix_s - 1));
    for (int s = 1; s <= after - before; ++s) {
      if (CivilOk(AddSeconds(gap_start, s))) return true;
    }
    return false;
  }

 private:
  bool CivilOk(const CivilTime& c) const {
    if (!f_.seconds.test(c.second) || !f_.minutes.test(c.minute) || !f_.hours.test(c.hour)) {
      return false;
    }
    if (f_.year_restricted && (c.year < CronExpr::kMinYear || c.year > CronExpr::kMaxYear ||
                               !f_.years.test(c.year - CronExpr::kMinYear))) {
      return false;
    }
    if (!f_.months.test(c.month)) return false;
    const int dim = DaysInMonth(c.year, c.month);
    const int wd = Weekday(c.year, c.month, c.day);
    auto is_workday = [&](int d) {
      const int w = Weekday(c.year, c.month, d);
      return w >= 1 && w <= 5;
    };
    bool dom = f_.days_of_month.test(c.day) || (f_.last_day && c.day == dim);
    if (f_.last_weekday) {
      int d = dim;
      while (!is_workday(d)) --d;
      dom = dom || d == c.day;
    }
    for (int n = 1; n <= 31; ++n) {
      if (!f_.nearest_weekday.test(n) || n > dim) continue;
      // Nearest Mon-Fri to day n inside the month, earlier day first on a tie is impossible.
      int best = 0;
      for (int dist = 0; dist <= 2 && best == 0; ++dist) {
        if (n - dist >= 1 && is_workday(n - dist) && (dist < 2 || n - dist + 2 > dim))
          best = n - dist;
        if (!best && n + dist <= dim && is_workday(n + dist) && (dist < 2 || n + dist - 2 < 1)) {
          best = n + dist;
        }
      }
      dom = dom || best == c.day;
    }
    int nth = 0;
    for (int d = c.day; d >= 1; d -= 7) ++nth;
    const bool dow = f_.days_of_week.test(wd) || f_.nth[wd].test(nth) ||
                     (f_.last_of_month.test(wd) && c.day + 7 > dim);
    if (f_.dom_restricted && f_.dow_restricted) return dom || dow;
    if (f_.dom_restricted) return dom;
    if (f_.dow_restricted) return dow;
    return true;
  }

  const CronExpr& e_;
  const CronExpr::Fields& f_;
  TimeZone zone_;
};

std::vector<TimeZone> Zones() {
  std::vector<TimeZone> out{TimeZone()};
  for (const char* name : {"America/New_York", "Europe/Berlin", "Australia/Lord_Howe",
                           "America/Sao_Paulo", "Asia/Kolkata"}) {
    Result<TimeZone> z = TimeZone::Load(name);
    GNOMON_CHECK(z.ok());
    out.push_back(*z);
  }
  return out;
}

// An instant near a DST transition of `zone` (if it has any) or anywhere in 2015-2035.
Instant SampleInstant(RandomCron& r, const TimeZone& zone) {
  const int64_t base = r.Uniform64(1420070400, 2082758400);  // 2015..2036
  if (r.Uniform(0, 2) > 0) {
    if (auto tr = zone.NextTransition(Instant::FromUnixSeconds(base))) {
      return tr->at + std::chrono::seconds(r.Uniform64(-2 * 86400, 2 * 86400));
    }
  }
  return Instant::FromUnixMillis(base * 1000 + r.Uniform(0, 999));
}

TEST(CronPropertyTest, NextPrevMatchesAgreeOnRandomExpressions) {
  RandomCron r(20261129);
  const std::vector<TimeZone> zones = Zones();
  int checked = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string text = r.Expression();
    const TimeZone& zone = zones[i % zones.size()];
    Result<CronExpr> e = CronExpr::Parse(text, CronOptions{zone, "job"});
    ASSERT_TRUE(e.ok()) << text << ": " << e.status().ToString();
    const Instant t = SampleInstant(r, zone);
    const std::string ctx = "\"" + text + "\" tz=" + zone.name() + " t=" + t.ToRfc3339();
    std::optional<Instant> next = e->Next(t);
    if (next) {
      ++checked;
      ASSERT_GT(*next, t) << ctx;
      ASSERT_TRUE(e->Matches(*next)) << ctx << " next=" << next->ToRfc3339();
      std::optional<Instant> back = e->Prev(*next);
      if (back) {
        ASSERT_LE(*back, t) << ctx << " next=" << next->ToRfc3339();
      }
    }
    std::optional<Instant> prev = e->Prev(t);
    if (prev) {
      ASSERT_LT(*prev, t) << ctx;
      ASSERT_TRUE(e->Matches(*prev)) << ctx << " prev=" << prev->ToRfc3339();
      // Next(Prev(t)) is not before t (it may not exist when Prev(t) is the last fire).
      std::optional<Instant> fwd = e->Next(*prev);
      if (fwd) {
        ASSERT_GE(*fwd, t) << ctx << " prev=" << prev->ToRfc3339()
                           << " next(prev)=" << fwd->ToRfc3339() << " is between prev and t";
      }
    }
  }
  EXPECT_GT(checked, 2000);
}

TEST(CronPropertyTest, NoFireSkippedAgainstBruteForce) {
  RandomCron r(42);
  const std::vector<TimeZone> zones = Zones();
  int scanned = 0;
  for (int i = 0; i < 4000 && scanned < 400; ++i) {
    const std::string text = r.Expression();
    const TimeZone& zone = zones[i % zones.size()];
    Result<CronExpr> e = CronExpr::Parse(text, CronOptions{zone, "job"});
    ASSERT_TRUE(e.ok()) << text;
    const Oracle oracle(*e);
    const Instant t = SampleInstant(r, zone);
    std::optional<Instant> next = e->Next(t);
    const std::string ctx = "\"" + text + "\" tz=" + zone.name() + " t=" + t.ToRfc3339();
    // Scan whole minutes when the schedule only fires at second 0 (all offsets here are whole
    // minutes, so every candidate instant is a whole minute), else every second.
    const bool minute_steps = e->fields().seconds.count() == 1 && e->fields().seconds.test(0);
    const int64_t step = minute_steps ? 60 : 1;
    const int64_t horizon = minute_steps ? 3 * 86400 : 4 * 3600;
    const int64_t start = t.unix_seconds() + 1;
    const int64_t end = next ? next->unix_seconds() : start + horizon;
    if (end - start > horizon) continue;
    ++scanned;
    int64_t first = minute_steps ? (start + 59) / 60 * 60 : start;
    for (int64_t x = first; x < end; x += step) {
      ASSERT_FALSE(oracle.Fires(x))
          << ctx << ": skipped fire at " << Instant::FromUnixSeconds(x).ToRfc3339()
          << ", Next said " << (next ? next->ToRfc3339() : "never");
    }
    if (next) {
      ASSERT_TRUE(oracle.Fires(next->unix_seconds())) << ctx << " next=" << next->ToRfc3339();
    }
  }
  EXPECT_GE(scanned, 300);
}

TEST(CronPropertyTest, MatchesAgreesWithOracleAroundTransitions) {
  RandomCron r(7);
  const std::vector<TimeZone> zones = Zones();
  for (int i = 0; i < 300; ++i) {
    const std::string text = r.Expression();
    const TimeZone& zone = zones[1 + i % (zones.size() - 1)];
    Result<CronExpr> e = CronExpr::Parse(text, CronOptions{zone, "job"});
    ASSERT_TRUE(e.ok());
    const Oracle oracle(*e);
    const Instant t = SampleInstant(r, zone);
    for (int64_t x = t.unix_seconds() - 1800; x < t.unix_seconds() + 1800; x += 30) {
      ASSERT_EQ(e->Matches(Instant::FromUnixSeconds(x)), oracle.Fires(x))
          << "\"" << text << "\" tz=" << zone.name() << " at "
          << Instant::FromUnixSeconds(x).ToRfc3339();
    }
  }
}

// One Next query and its expected answer.
struct NextCase {
  const char* expr;
  const char* zone;
  const char* from;
  const char* next;  // Next(from)
};

void ExpectNext(const NextCase& c) {
  Result<TimeZone> zone = TimeZone::Load(c.zone);
  ASSERT_TRUE(zone.ok()) << c.zone;
  Result<CronExpr> e = CronExpr::Parse(c.expr, CronOptions{*zone, "job"});
  ASSERT_TRUE(e.ok()) << c.expr;
  const std::optional<Instant> next = e->Next(*Instant::ParseRfc3339(c.from));
  ASSERT_TRUE(next) << c.expr;
  EXPECT_EQ(next->ToRfc3339Seconds(), Instant::ParseRfc3339(c.next)->ToRfc3339Seconds())
      << c.expr << " " << c.zone << " from " << c.from;
}

// The two passes of a fall-back hour: an interval job fires in both, however far away its next
// matching day is (the search's jump to two days before the next civil match must not skip the
// second pass, whose wall times are earlier than the start's; nor, for Prev, the first pass).
TEST(CronDstTest, BothPassesOfAFallBackHourAreFoundBeforeAFarNextDay) {
  for (const NextCase& c : {
           // 01:50 EDT on the fall-back Sunday; the next Sunday is a week away.
           NextCase{"*/20 1 * * 0", "America/New_York", "2027-11-07T05:50:00Z",
                    "2027-11-07T06:00:00Z"},
           // 02:40 CEST on 31 October; the next 31st is two months away.
           NextCase{"19,39 2 31 * *", "Europe/Berlin", "2027-10-31T00:40:00Z",
                    "2027-10-31T01:19:00Z"},
       }) {
    ExpectNext(c);
  }
  // Prev from the second pass finds the first pass's last fire.
  struct PrevCase {
    const char* expr;
    const char* zone;
    const char* before;
    const char* prev;
  };
  for (const PrevCase& c : {
           // 01:10 EST (second pass, before its 01:20): the first pass fired at 01:40 EDT.
           PrevCase{"20,40 1 * * 0", "America/New_York", "2027-11-07T06:10:00Z",
                    "2027-11-07T05:40:00Z"},
           // 02:10 CET (second pass): the first pass fired at 02:39 CEST.
           PrevCase{"19,39 2 31 * *", "Europe/Berlin", "2027-10-31T01:10:00Z",
                    "2027-10-31T00:39:00Z"},
       }) {
    Result<TimeZone> zone = TimeZone::Load(c.zone);
    ASSERT_TRUE(zone.ok());
    Result<CronExpr> e = CronExpr::Parse(c.expr, CronOptions{*zone, "job"});
    ASSERT_TRUE(e.ok()) << c.expr;
    std::optional<Instant> prev = e->Prev(*Instant::ParseRfc3339(c.before));
    ASSERT_TRUE(prev) << c.expr;
    EXPECT_EQ(prev->ToRfc3339(), Instant::ParseRfc3339(c.prev)->ToRfc3339()) << c.expr;
  }
}

// The mirror image, for Prev (used by the catch-up): from after a fall-back hour, both passes come
// back in reverse order (second pass first), also when the start is days after the matching day
// (the search's jump to two days after the last civil match must not skip the second pass).
TEST(CronDstTest, PrevReturnsBothPassesOfAFallBackHourInReverseOrder) {
  struct Case {
    const char* expr;
    const char* zone;
    const char* before;
    std::vector<const char*> prevs;  // Prev(before), Prev(Prev(before)), ...
  };
  const std::vector<const char*> new_york = {
      "2027-11-07T06:40:00Z", "2027-11-07T06:20:00Z", "2027-11-07T06:00:00Z",  // 01:xx EST
      "2027-11-07T05:40:00Z", "2027-11-07T05:20:00Z", "2027-11-07T05:00:00Z",  // 01:xx EDT
      "2027-10-31T05:40:00Z"};
  const std::vector<const char*> berlin = {
      "2027-10-31T01:39:00Z", "2027-10-31T01:19:00Z",  // 02:xx CET
      "2027-10-31T00:39:00Z", "2027-10-31T00:19:00Z",  // 02:xx CEST
      "2027-08-31T00:39:00Z"};
  for (const Case& c : {
           // 02:05 EST, just after the second pass.
           Case{"*/20 1 * * 0", "America/New_York", "2027-11-07T07:05:00Z", new_york},
           // 00:59 EST the next Sunday: the last matching day is a week back.
           Case{"*/20 1 * * 0", "America/New_York", "2027-11-14T05:59:00Z", new_york},
           // 03:00 CET, just after the second pass.
           Case{"19,39 2 31 * *", "Europe/Berlin", "2027-10-31T02:00:00Z", berlin},
           // 30 December: the last 31st is two months back.
           Case{"19,39 2 31 * *", "Europe/Berlin", "2027-12-30T00:00:00Z", berlin},
       }) {
    Result<TimeZone> zone = TimeZone::Load(c.zone);
    ASSERT_TRUE(zone.ok());
    Result<CronExpr> e = CronExpr::Parse(c.expr, CronOptions{*zone, "job"});
    ASSERT_TRUE(e.ok()) << c.expr;
    Instant t = *Instant::ParseRfc3339(c.before);
    for (const char* want : c.prevs) {
      std::optional<Instant> prev = e->Prev(t);
      ASSERT_TRUE(prev) << c.expr << " before " << t.ToRfc3339();
      EXPECT_EQ(prev->ToRfc3339(), Instant::ParseRfc3339(want)->ToRfc3339())
          << c.expr << " from " << c.before;
      t = *prev;
    }
  }
}

// Random expressions started inside fall-back overlaps (Next from the first pass, Prev from the
// second), checked against the brute-force oracle over the whole overlap and an hour around it.
TEST(CronPropertyTest, FallBackOverlapsAreNeverJumpedOver) {
  RandomCron r(2027);
  const std::vector<TimeZone> zones = Zones();
  int checked = 0;
  for (int i = 0; i < 3000 && checked < 400; ++i) {
    const TimeZone& zone = zones[1 + i % (zones.size() - 1)];
    // A fall-back transition of the zone after a random instant.
    std::optional<TimeZone::Transition> tr =
        zone.NextTransition(Instant::FromUnixSeconds(r.Uniform64(1420070400, 2051222400)));
    for (int k = 0; k < 3 && tr && !(tr->to < tr->from); ++k) tr = zone.NextTransition(tr->at);
    if (!tr || !(tr->to < tr->from)) continue;
    // A random expression whose hour field is the repeated hour (most would never fire there).
    std::vector<std::string> fields;
    std::istringstream words(r.Expression());
    for (std::string w; words >> w;) fields.push_back(w);
    fields[fields.size() >= 6 ? 2 : 1] = std::to_string(tr->to.hour);
    std::string text;
    for (const std::string& f : fields) text += (text.empty() ? "" : " ") + f;
    Result<CronExpr> e = CronExpr::Parse(text, CronOptions{zone, "job"});
    ASSERT_TRUE(e.ok()) << text;
    const Oracle oracle(*e);
    const int64_t at = tr->at.unix_seconds();
    const int64_t overlap = CivilSecondsSinceEpoch(tr->from) - CivilSecondsSinceEpoch(tr->to);
    const int64_t lo = at - overlap - 3600, hi = at + overlap + 3600;  // the window scanned
    ++checked;
    // Next from the first pass: no oracle fire is skipped before it, within the window.
    const int64_t t = at - r.Uniform64(1, overlap);
    const std::optional<Instant> next = e->Next(Instant::FromUnixSeconds(t));
    const std::string ctx = "\"" + text + "\" tz=" + zone.name();
    const int64_t next_s = next ? next->unix_seconds() : hi + 1;
    for (int64_t x = t + 1; x < std::min(next_s, hi); ++x) {
      ASSERT_FALSE(oracle.Fires(x)) << ctx << " Next(" << Instant::FromUnixSeconds(t).ToRfc3339()
                                    << ") = " << (next ? next->ToRfc3339() : "never") << " skips "
                                    << Instant::FromUnixSeconds(x).ToRfc3339();
    }
    // Prev from the second pass: no oracle fire is skipped after it, within the window.
    const int64_t u = at + r.Uniform64(0, overlap - 1);
    const std::optional<Instant> prev = e->Prev(Instant::FromUnixSeconds(u));
    const int64_t prev_s = prev ? prev->unix_seconds() : lo - 1;
    for (int64_t x = u - 1; x > std::max(prev_s, lo); --x) {
      ASSERT_FALSE(oracle.Fires(x)) << ctx << " Prev(" << Instant::FromUnixSeconds(u).ToRfc3339()
                                    << ") = " << (prev ? prev->ToRfc3339() : "never") << " skips "
                                    << Instant::FromUnixSeconds(x).ToRfc3339();
    }
  }
  EXPECT_GE(checked, 300);
}

// Next's fast path (the first civil match inside the start's offset segment) at segment edges:
// the answer just before, at and just after a spring-forward and a fall-back transition, and a
// fixed time within two days of one, in hour- and 30-minute-shift zones and a zone without DST.
TEST(CronDstTest, NextAtOffsetSegmentEdges) {
  for (const NextCase& c : {
           // New York springs forward at 2025-03-09T07:00Z (02:00 EST -> 03:00 EDT).
           NextCase{"59 1 * * *", "America/New_York", "2025-03-09T06:00:00Z",
                    "2025-03-09T06:59:00Z"},
           NextCase{"0 3 * * *", "America/New_York", "2025-03-09T06:00:00Z",
                    "2025-03-09T07:00:00Z"},
           NextCase{"30 2 * * *", "America/New_York", "2025-03-09T06:00:00Z",
                    "2025-03-09T07:00:00Z"},
           NextCase{"*/15 * * * *", "America/New_York", "2025-03-09T06:50:00Z",
                    "2025-03-09T07:00:00Z"},
           NextCase{"1 3 * * *", "America/New_York", "2025-03-09T06:59:59Z",
                    "2025-03-09T07:01:00Z"},
           NextCase{"30 2 * * *", "America/New_York", "2025-03-09T07:00:00Z",
                    "2025-03-10T06:30:00Z"},
           // ... and falls back at 2025-11-02T06:00Z (02:00 EDT -> 01:00 EST).
           NextCase{"59 1 * * *", "America/New_York", "2025-11-02T05:00:00Z",
                    "2025-11-02T05:59:00Z"},
           NextCase{"*/30 1 * * *", "America/New_York", "2025-11-02T05:45:00Z",
                    "2025-11-02T06:00:00Z"},
           NextCase{"30 1 * * *", "America/New_York", "2025-11-02T05:45:00Z",
                    "2025-11-03T06:30:00Z"},
           NextCase{"30 1 * * *", "America/New_York", "2025-11-02T06:00:00Z",
                    "2025-11-03T06:30:00Z"},
           NextCase{"0 2 * * *", "America/New_York", "2025-11-02T05:45:00Z",
                    "2025-11-02T07:00:00Z"},
           // Berlin: 2025-03-30T01:00Z (02:00 CET -> 03:00 CEST), 2025-10-26T01:00Z (03:00 ->
           // 02:00).
           NextCase{"30 2 * * *", "Europe/Berlin", "2025-03-30T00:59:59Z", "2025-03-30T01:00:00Z"},
           NextCase{"0 3 * * *", "Europe/Berlin", "2025-03-30T00:59:59Z", "2025-03-30T01:00:00Z"},
           NextCase{"59 2 * * *", "Europe/Berlin", "2025-10-26T00:00:00Z", "2025-10-26T00:59:00Z"},
           NextCase{"59 2 * * *", "Europe/Berlin", "2025-10-26T01:00:00Z", "2025-10-27T01:59:00Z"},
           NextCase{"*/20 2 * * *", "Europe/Berlin", "2025-10-26T00:59:00Z",
                    "2025-10-26T01:00:00Z"},
           // Lord Howe shifts 30 minutes: 2025-04-06 02:00 -> 01:30 (04-05T15:00Z), 2025-10-05
           // 02:00 -> 02:30 (10-04T15:30Z).
           NextCase{"45 1 * * *", "Australia/Lord_Howe", "2025-04-05T14:00:00Z",
                    "2025-04-05T14:45:00Z"},
           NextCase{"45 1 * * *", "Australia/Lord_Howe", "2025-04-05T14:50:00Z",
                    "2025-04-06T15:15:00Z"},
           NextCase{"*/15 1 * * *", "Australia/Lord_Howe", "2025-04-05T14:50:00Z",
                    "2025-04-05T15:00:00Z"},
           NextCase{"15 2 * * *", "Australia/Lord_Howe", "2025-10-04T15:00:00Z",
                    "2025-10-04T15:30:00Z"},
           NextCase{"30 2 * * *", "Australia/Lord_Howe", "2025-10-04T15:00:00Z",
                    "2025-10-04T15:30:00Z"},
           NextCase{"31 2 * * *", "Australia/Lord_Howe", "2025-10-04T15:30:00Z",
                    "2025-10-04T15:31:00Z"},
           // Kolkata has had no transition since 1945.
           NextCase{"30 2 * * *", "Asia/Kolkata", "2025-03-09T20:59:59Z", "2025-03-09T21:00:00Z"},
           NextCase{"*/15 * * * *", "Asia/Kolkata", "2025-11-02T05:59:59Z", "2025-11-02T06:00:00Z"},
       }) {
    ExpectNext(c);
  }
}

// The same edges swept: starts every 5 minutes (and just before each) from 2 h 30 min before to
// 2 h 30 min after each 2025 transition, and around the two-day mark after it; every answer
// checked against the brute-force oracle, minute by minute from the start.
TEST(CronDstTest, NextAroundTransitionsAgreesWithTheOracle) {
  int checked = 0;
  for (const char* name :
       {"America/New_York", "Europe/Berlin", "Australia/Lord_Howe", "Asia/Kolkata"}) {
    Result<TimeZone> zone = TimeZone::Load(name);
    ASSERT_TRUE(zone.ok()) << name;
    std::vector<int64_t> edges;  // the transitions of 2025 (Kolkata: none, a plain day)
    for (Instant t = *Instant::ParseRfc3339("2025-01-01T00:00:00Z");;) {
      const std::optional<TimeZone::Transition> tr = zone->NextTransition(t);
      if (!tr || tr->at > *Instant::ParseRfc3339("2026-01-01T00:00:00Z")) break;
      edges.push_back(tr->at.unix_seconds());
      t = tr->at;
    }
    if (edges.empty()) edges.push_back(1741503600);  // 2025-03-09T07:00:00Z
    for (const char* text : {"*/15 * * * *", "0,30 1-3 * * *", "30 2 * * *", "45 1 * * *",
                             "0 3 * * *", "15 2 * * *"}) {
      Result<CronExpr> e = CronExpr::Parse(text, CronOptions{*zone, "job"});
      ASSERT_TRUE(e.ok()) << text;
      const Oracle oracle(*e);
      for (const int64_t edge : edges) {
        std::vector<int64_t> starts;
        for (int64_t s = -9000; s <= 9000; s += 300) starts.insert(starts.end(), {s - 1, s});
        for (int64_t s = 2 * 86400 - 7200; s <= 2 * 86400 + 7200; s += 1800) starts.push_back(s);
        for (const int64_t offset : starts) {
          const int64_t from = edge + offset;
          const std::optional<Instant> next = e->Next(Instant::FromUnixSeconds(from));
          ASSERT_TRUE(next) << text;
          const std::string ctx = std::string(text) + " " + name + " from " +
                                  Instant::FromUnixSeconds(from).ToRfc3339Seconds();
          ASSERT_TRUE(oracle.Fires(next->unix_seconds())) << ctx << ": " << next->ToRfc3339();
          for (int64_t x = (from / 60 + 1) * 60; x < next->unix_seconds(); x += 60) {
            ASSERT_FALSE(oracle.Fires(x))
                << ctx << ": skipped " << Instant::FromUnixSeconds(x).ToRfc3339() << ", Next said "
                << next->ToRfc3339();
          }
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 2000);
}

TEST(CronPropertyTest, EveryIsAlignedToTheEpochOnEveryNode) {
  Result<CronExpr> e = CronExpr::Parse("@every 7m13s");
  ASSERT_TRUE(e.ok());
  RandomCron r(3);
  for (int i = 0; i < 1000; ++i) {
    const Instant t = Instant::FromUnixMillis(r.Uniform64(0, int64_t{4'000'000'000'000}));
    const std::optional<Instant> next = e->Next(t);
    ASSERT_TRUE(next.has_value());
    EXPECT_GT(*next, t);
    EXPECT_EQ(next->unix_millis() % 433'000, 0);
    EXPECT_LE(*next - t, std::chrono::seconds(433));
    EXPECT_EQ(*e->Prev(*next), *next - std::chrono::seconds(433));
  }
}

}  // namespace
}  // namespace gnomon
