#include "gnomon/job.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace gnomon {
namespace {

JobSpec Valid() {
  JobSpec j;
  j.id = "monthly-settlement";
  j.schedule = "0 0 2 1 * *";
  j.timezone = "Asia/Shanghai";
  j.command = "/opt/settle --month=prev";
  return j;
}

TEST(JobSpecTest, ValidJobPasses) { EXPECT_TRUE(ValidateJobSpec(Valid()).ok()); }

TEST(JobSpecTest, ErrorsNameTheField) {
  JobSpec j = Valid();
  j.schedule = "0 0 25 * * *";
  EXPECT_EQ(ValidateJobSpec(j).message(),
            "job \"monthly-settlement\": schedule: hour: 25 is out of range 0-23 (column 5)");
  j = Valid();
  j.retries = -1;
  EXPECT_EQ(ValidateJobSpec(j).message(),
            "job \"monthly-settlement\": retries: -1 is out of range 0-100");
  j = Valid();
  j.timezone = "../../etc/passwd";
  EXPECT_NE(ValidateJobSpec(j).message().find("timezone: unknown time zone"), std::string::npos);
  j = Valid();
  j.argv = {"/bin/true"};
  EXPECT_NE(ValidateJobSpec(j).message().find("use only one of"), std::string::npos);
  j = Valid();
  j.command.clear();
  EXPECT_NE(ValidateJobSpec(j).message().find("needs one of"), std::string::npos);
  j = Valid();
  j.shards = 0;
  EXPECT_NE(ValidateJobSpec(j).message().find("shards: 0 is out of range"), std::string::npos);
}

TEST(JobSpecTest, HostileIdsAreRejected) {
  for (const std::string& id :
       std::vector<std::string>{"", "a{b}", "a:b", "a*", "a?", "a[", "a/b", "a\\b", "..x/..",
                                "a\r\nb", std::string("a\0b", 3), std::string(10000, 'a'), "é"}) {
    EXPECT_FALSE(IsValidJobId(id)) << id;
    JobSpec j = Valid();
    j.id = id;
    EXPECT_FALSE(ValidateJobSpec(j).ok());
  }
  EXPECT_TRUE(IsValidJobId("job-1.daily_v2"));
  EXPECT_TRUE(IsValidJobId(std::string(128, 'a')));
}

TEST(FireKeyTest, RunIdIsDeterministic) {
  FireKey f{"report", Instant::FromUnixMillis(1764451800000), 0, 1};
  EXPECT_EQ(f.RunId(), "report@1764451800000");
  f.shard = 3;
  f.shard_count = 4;
  EXPECT_EQ(f.RunId(), "report@1764451800000#3");
}

TEST(EnumTest, RoundTrip) {
  EXPECT_EQ(*ParseOverlapPolicy("replace"), OverlapPolicy::kReplace);
  EXPECT_EQ(ToString(MisfirePolicy::kAll), "all");
  EXPECT_EQ(*ParseRunOutcome("timed_out"), RunOutcome::kTimedOut);
  EXPECT_EQ(ParseLostPolicy("maybe").status().message(),
            "on_lost: \"maybe\" is not one of fail, rerun");
}

}  // namespace
}  // namespace gnomon

namespace gnomon {
namespace {

// JobSpec::http is an optional on the heap: a pointer's worth when unset, a deep copy when copied.
TEST(HeapOptionalTest, CopiesValuesAndCostsAPointerWhenEmpty) {
  static_assert(sizeof(HeapOptional<HttpTarget>) == sizeof(void*));
  JobSpec a;
  EXPECT_FALSE(a.http.has_value());
  a.http = HttpTarget{"http://127.0.0.1:8080/hook", "GET", {{"X-A", "1"}}};
  JobSpec b = a;
  ASSERT_TRUE(b.http);
  EXPECT_EQ(b.http->url, "http://127.0.0.1:8080/hook");
  EXPECT_NE(&*a.http, &*b.http) << "a copy shares the target";
  b.http->method = "POST";
  EXPECT_EQ(a.http->method, "GET");
  EXPECT_FALSE(a.http == b.http);
  b.http->method = "GET";
  EXPECT_TRUE(a.http == b.http);
  JobSpec c = std::move(b);
  EXPECT_TRUE(c.http);
  c.http.reset();
  EXPECT_FALSE(c.http);
  EXPECT_FALSE(c.http == a.http);
  c.http.emplace().url = "http://x/";
  EXPECT_EQ(c.http->method, "POST");
  c.http = std::nullopt;
  EXPECT_FALSE(c.http.has_value());
}

}  // namespace
}  // namespace gnomon

namespace gnomon {
namespace {

JobSpec HttpJob(std::string url, std::map<std::string, std::string> headers = {}) {
  JobSpec j;
  j.id = "hook";
  j.schedule = "@hourly";
  j.http = HttpTarget{std::move(url), "POST", std::move(headers)};
  return j;
}

// What the executors would only find at run time is refused when the job is defined, naming the
// field (docs/reliability.md "Definitions that are accepted but can only fail later").
TEST(ValidateJobSpecTest, DefinitionsThatCouldOnlyFailLaterAreRefused) {
  auto message = [](const JobSpec& j) { return ValidateJobSpec(j).message(); };
  EXPECT_TRUE(ValidateJobSpec(HttpJob("http://127.0.0.1:9000/x?y=1", {{"X-Team", "fin"}})).ok());
  EXPECT_TRUE(ValidateJobSpec(HttpJob("https://[::1]:8443/")).ok());
  EXPECT_THAT(message(HttpJob("http://h/", {{"X-A", "v\r\nX-Injected: 1"}})),
              ::testing::HasSubstr("http.headers.X-A: the value has a line break"));
  EXPECT_THAT(message(HttpJob("http://h/", {{"X-A:B", "v"}})),
              ::testing::HasSubstr("http.headers: \"X-A:B\" is not a header name"));
  EXPECT_THAT(message(HttpJob("http://h/", {{"X A", "v"}})), ::testing::HasSubstr("http.headers"));
  EXPECT_THAT(message(HttpJob("http://h/", {{"Content-Length", "5"}})),
              ::testing::HasSubstr("is set by gnomon"));
  EXPECT_THAT(message(HttpJob("http://user:pw@h/")), ::testing::HasSubstr("http.url"));
  EXPECT_THAT(message(HttpJob("http://user:pw@h/")), ::testing::HasSubstr("user info"));
  EXPECT_THAT(message(HttpJob("http://h/a\r\nb")), ::testing::HasSubstr("control"));
  EXPECT_THAT(message(HttpJob("http://h:99999/")), ::testing::HasSubstr("invalid port"));
  EXPECT_THAT(message(HttpJob("http://:80/")), ::testing::HasSubstr("no host"));
  EXPECT_THAT(message(HttpJob("ftp://h/")), ::testing::HasSubstr("must start with http"));

  JobSpec argv;
  argv.id = "a";
  argv.schedule = "@hourly";
  argv.argv = {"", "x"};
  EXPECT_THAT(message(argv), ::testing::HasSubstr("argv[0]: is empty"));
  argv.argv = {"/bin/true", std::string("a\0b", 3)};
  EXPECT_THAT(message(argv), ::testing::HasSubstr("argv[1]: contains a NUL byte"));

  for (const char* id : {".", "..", "...."}) {
    EXPECT_FALSE(IsValidJobId(id)) << id;
    JobSpec dots = argv;
    dots.id = id;
    dots.argv = {"/bin/true"};
    EXPECT_THAT(message(dots), ::testing::HasSubstr("not be only dots"));
  }
  EXPECT_TRUE(IsValidJobId(".a"));
  EXPECT_TRUE(IsValidJobId("a..b"));

  JobSpec run_as = argv;
  run_as.argv = {"/bin/true"};
  run_as.run_as = "nobody:nogroup";
  EXPECT_TRUE(ValidateJobSpec(run_as).ok());
  run_as.run_as = "65534";
  EXPECT_TRUE(ValidateJobSpec(run_as).ok());
  for (const char* bad : {"-x", "a:b:c", "a b", ":g", "u:"}) {
    run_as.run_as = bad;
    EXPECT_THAT(message(run_as), ::testing::HasSubstr("run_as")) << bad;
  }
  JobSpec limits = HttpJob("http://h/");
  limits.memory_max = 1 << 20;
  EXPECT_THAT(message(limits), ::testing::HasSubstr("process jobs"));
}

TEST(ParamsTest, OverridesAreMergedKeyByKeyOverTheDefaults) {
  EXPECT_EQ(*MergeParams("", ""), "");
  EXPECT_EQ(*MergeParams(R"({"a":1})", ""), R"({"a":1})");
  EXPECT_EQ(*MergeParams("", R"({"b":"x"})"), R"({"b":"x"})");
  // A key of the overrides replaces the default's whole value (no deep merge).
  EXPECT_EQ(*MergeParams(R"({"a":1,"o":{"x":1,"y":2}})", R"({"o":{"y":3},"z":null})"),
            R"({"a":1,"o":{"y":3},"z":null})");
}

TEST(ParamsTest, MergeRefusesWhatIsNotASmallObject) {
  auto message = [](std::string_view defaults, std::string_view overrides) {
    Result<std::string> r = MergeParams(defaults, overrides);
    return r.ok() ? std::string("ok") : r.status().message();
  };
  EXPECT_EQ(message("", "[1]"), "params: must be a JSON object");
  EXPECT_EQ(message("", "{\"a\":"), "params: not valid JSON");
  EXPECT_EQ(message("", "\"text\""), "params: must be a JSON object");
  const std::string half = "{\"a\":\"" + std::string(kMaxParamsBytes / 2 + 10, 'x') + "\"}";
  const std::string other = "{\"b\":\"" + std::string(kMaxParamsBytes / 2 + 10, 'y') + "\"}";
  EXPECT_EQ(*MergeParams(half, ""), half);
  EXPECT_THAT(message(half, other), ::testing::HasSubstr("once merged with the job's defaults"));
  EXPECT_THAT(message("", "{\"a\":\"" + std::string(kMaxParamsBytes, 'x') + "\"}"),
              ::testing::HasSubstr("larger than 16 KiB"));
}

TEST(ParamsTest, ValidationNamesTheJobAndTheField) {
  JobSpec job;
  job.id = "p";
  job.schedule = "* * * * *";
  job.command = "true";
  job.params = R"({"month":"2026-11"})";
  EXPECT_TRUE(ValidateJobSpec(job).ok());
  job.params = "[]";
  EXPECT_EQ(ValidateJobSpec(job).message(), "job \"p\": params: must be a JSON object");
  job.params = "{";
  EXPECT_EQ(ValidateJobSpec(job).message(), "job \"p\": params: not valid JSON");
}

TEST(ByteSizeTest, ParsesUnitsAndRefusesGarbage) {
  EXPECT_EQ(*ParseByteSize("512"), 512);
  EXPECT_EQ(*ParseByteSize("64K"), 64 * 1024);
  EXPECT_EQ(*ParseByteSize("512MiB"), int64_t{512} << 20);
  EXPECT_EQ(*ParseByteSize("2G"), int64_t{2} << 30);
  for (const char* bad : {"", "M", "-1", "1.5G", "1X", "99999999999999999T"}) {
    EXPECT_FALSE(ParseByteSize(bad).ok()) << bad;
  }
}

TEST(CompileJobTest, CompilesOnceAndSharesASchedulePerZone) {
  JobSpec a = Valid();
  a.id = "a";
  a.schedule = "*/7 * * * *";
  JobSpec b = a;
  b.id = "b";
  Result<CompiledJob> ca = CompileJob(a);
  Result<CompiledJob> cb = CompileJob(b);
  ASSERT_TRUE(ca.ok() && cb.ok());
  EXPECT_EQ(ca->spec.id, "a");
  EXPECT_EQ(ca->schedule.get(), cb->schedule.get()) << "same schedule and zone: one expression";
  b.timezone = "Asia/Tokyo";
  EXPECT_NE(CompileJob(b)->schedule.get(), ca->schedule.get()) << "another zone";
  // H hashes the id: never shared.
  a.schedule = b.schedule = "H * * * *";
  b.timezone = a.timezone;
  EXPECT_NE(CompileJob(a)->schedule.get(), CompileJob(b)->schedule.get());
  // The compiled schedule is the definition's: its next fire is the expression's.
  const Instant from = Instant::FromUnixMillis(1'800'000'000'000);
  const CronOptions in_zone{*TimeZone::Load(ca->spec.timezone), "a"};
  EXPECT_EQ(ca->schedule->Next(from), CronExpr::Parse("*/7 * * * *", in_zone)->Next(from));
  // Errors name the field, as ValidateJobSpec's do.
  a.timezone = "Mars/Olympus";
  EXPECT_EQ(CompileJob(a).status().message(), ValidateJobSpec(a).message());
  EXPECT_NE(ValidateJobSpec(a).message().find("timezone:"), std::string::npos);
}

}  // namespace
}  // namespace gnomon
