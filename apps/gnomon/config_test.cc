#include "apps/gnomon/config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "apps/gnomon/node_options.h"

namespace gnomon::app {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::minutes;
using std::chrono::seconds;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = std::filesystem::path(::testing::TempDir()) /
            ("gnomon_config_test_" + std::string(info->test_suite_name()) + "_" + info->name() +
             "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  // Writes `text` to `name` below the directory and returns the full path.
  std::string Write(const std::string& name, std::string_view text) const {
    const std::filesystem::path p = path_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary);
    out << text;
    return p.string();
  }
  std::string path() const { return path_.string(); }

 private:
  std::filesystem::path path_;
};

Result<std::vector<JobSpec>> Jobs(std::string_view text, const JobSpec& defaults = {}) {
  return server::SpecsOf(ParseJobsFile(text, "jobs.toml", defaults));
}

Result<ServeConfig> Config(std::string_view text) {
  return ParseServeConfig(text, "gnomon.toml", "");
}

// The message of a failed load (and a test failure when it did not fail).
template <typename T>
std::string ErrorOf(const Result<T>& r) {
  EXPECT_FALSE(r.ok());
  return r.ok() ? std::string("<ok>") : r.status().message();
}
std::string ErrorOf(const Status& s) {
  EXPECT_FALSE(s.ok());
  return s.message();
}

// ---------------------------------------------------------------------------------------------
// Serve config

TEST(ServeConfigTest, EmptyFileGivesDocumentedDefaults) {
  Result<ServeConfig> c = Config("");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->backend, "sqlite://./gnomon-data/gnomon.db");
  EXPECT_FALSE(c->allow_unsafe_backend);
  EXPECT_EQ(c->node_id, "");
  EXPECT_EQ(c->listen, "127.0.0.1:8080");
  EXPECT_EQ(c->log_format, LogFormat::kText);
  EXPECT_EQ(c->log_level, LogLevel::kInfo);
  EXPECT_TRUE(c->jobs_files.empty());
  EXPECT_TRUE(c->crontab_files.empty());
  EXPECT_TRUE(c->jobs.empty());
  EXPECT_EQ(c->scheduler.claim_grace, seconds(1));
  EXPECT_EQ(c->scheduler.skew_tolerance, milliseconds(500));
  EXPECT_EQ(c->scheduler.claim_ahead, milliseconds(200));
  EXPECT_EQ(c->scheduler.lease_ttl, seconds(30));
  EXPECT_EQ(c->scheduler.shutdown_grace, seconds(30));
  EXPECT_EQ(c->scheduler.worker_threads, 8);
  EXPECT_EQ(c->scheduler.heartbeat_interval, seconds(5));
  EXPECT_EQ(c->defaults.timezone, "UTC");
  EXPECT_EQ(c->defaults.retries, 0);
  EXPECT_TRUE(ValidateServeConfig(ServeConfig{}).ok());
}

TEST(ServeConfigTest, FullConfigWithDefaultsIncludesAndCrontab) {
  TempDir dir;
  const std::string config = dir.Write("etc/gnomon.toml", R"(
backend = "redis://:s3cret@127.0.0.1:6379/2"
allow_unsafe_backend = true
node_id = "node-a"
listen = "0.0.0.0:9090"
log_format = "json"
log_level = "debug"
jobs = ["more-jobs.toml", "sub/other.toml"]
crontab = ["user.crontab"]

[scheduler]
claim_grace = "2s"
skew_tolerance = "250ms"
claim_ahead = "100ms"
lease_ttl = "1m"
shutdown_grace = "45s"
worker_threads = 16
heartbeat_interval = "10s"

[defaults]
timeout = "5m"
retries = 2
timezone = "Europe/Berlin"
command = "/bin/true"
env = { TEAM = "ops", LEVEL = "1" }

[[job]]
id = "inline"
schedule = "0 3 * * *"
argv = ["/usr/bin/backup", "--all"]
env = { LEVEL = "2" }

[[job]]
id = "inherits"
schedule = "@hourly"
)");
  dir.Write("etc/more-jobs.toml", R"([defaults]
retries = 5

[[job]]
id = "from-include"
schedule = "*/5 * * * *"
timezone = "UTC"
)");
  dir.Write("etc/sub/other.toml", R"([[job]]
id = "other"
schedule = "@daily"
http = { url = "http://127.0.0.1:9000/x", method = "GET", headers = { X-Team = "fin" } }
)");
  dir.Write("etc/user.crontab", "MAILTO=ops@example.com\n30 4 * * 1 /usr/bin/report\n");

  Result<ServeConfig> c = LoadServeConfig(config);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->backend, "redis://:s3cret@127.0.0.1:6379/2");
  EXPECT_TRUE(c->allow_unsafe_backend);
  EXPECT_EQ(c->node_id, "node-a");
  EXPECT_EQ(c->listen, "0.0.0.0:9090");
  EXPECT_EQ(c->log_format, LogFormat::kJson);
  EXPECT_EQ(c->log_level, LogLevel::kDebug);
  EXPECT_EQ(c->scheduler.claim_grace, seconds(2));
  EXPECT_EQ(c->scheduler.skew_tolerance, milliseconds(250));
  EXPECT_EQ(c->scheduler.claim_ahead, milliseconds(100));
  EXPECT_EQ(c->scheduler.lease_ttl, minutes(1));
  EXPECT_EQ(c->scheduler.shutdown_grace, seconds(45));
  EXPECT_EQ(c->scheduler.worker_threads, 16);
  EXPECT_EQ(c->scheduler.heartbeat_interval, seconds(10));
  const std::string etc = dir.path() + "/etc/";
  EXPECT_THAT(c->jobs_files, ElementsAre(etc + "more-jobs.toml", etc + "sub/other.toml"));
  EXPECT_THAT(c->crontab_files, ElementsAre(etc + "user.crontab"));
  EXPECT_EQ(c->defaults.timeout, minutes(5));
  EXPECT_EQ(c->defaults.id, "");

  // Inline jobs first, then the jobs files in order, then the crontabs.
  ASSERT_EQ(c->jobs.size(), 5u);
  const JobSpec& inline_job = c->jobs[0].spec;
  EXPECT_EQ(inline_job.id, "inline");
  EXPECT_EQ(inline_job.source, config + ":27");
  EXPECT_TRUE(inline_job.read_only);
  EXPECT_EQ(inline_job.timeout, minutes(5));         // [defaults]
  EXPECT_EQ(inline_job.retries, 2);                  // [defaults]
  EXPECT_EQ(inline_job.retry_backoff, seconds(10));  // built-in
  EXPECT_EQ(inline_job.timezone, "Europe/Berlin");   // [defaults]
  EXPECT_EQ(inline_job.command, "");                 // its argv replaces the default command
  EXPECT_THAT(inline_job.argv, ElementsAre("/usr/bin/backup", "--all"));
  EXPECT_EQ(inline_job.env, (std::map<std::string, std::string>{{"LEVEL", "2"}, {"TEAM", "ops"}}));

  const JobSpec& inherits = c->jobs[1].spec;
  EXPECT_EQ(inherits.id, "inherits");
  EXPECT_EQ(inherits.command, "/bin/true");
  EXPECT_EQ(inherits.env.at("LEVEL"), "1");

  const JobSpec& included = c->jobs[2].spec;
  EXPECT_EQ(included.id, "from-include");
  EXPECT_EQ(included.source, etc + "more-jobs.toml:4");
  EXPECT_EQ(included.retries, 5);  // the file's own [defaults]
  EXPECT_EQ(included.timeout, minutes(5));
  EXPECT_EQ(included.timezone, "UTC");
  EXPECT_TRUE(included.read_only);

  const JobSpec& other = c->jobs[3].spec;
  EXPECT_EQ(other.id, "other");
  EXPECT_EQ(other.retries, 2);  // the other file's [defaults] do not leak
  ASSERT_TRUE(other.http.has_value());
  EXPECT_EQ(other.command, "");
  EXPECT_EQ(other.http->method, "GET");

  const JobSpec& cron = c->jobs[4].spec;
  EXPECT_EQ(cron.id, "user.crontab-2");
  EXPECT_EQ(cron.command, "/usr/bin/report");
  EXPECT_EQ(cron.timezone, "Europe/Berlin");
  EXPECT_EQ(cron.source, etc + "user.crontab:2");
  EXPECT_EQ(cron.env.count("MAILTO"), 0u);
}

TEST(ServeConfigTest, UnknownTopLevelKeyNamesLineAndSuggests) {
  EXPECT_EQ(ErrorOf(Config("backend = \"sqlite://./x.db\"\n\nbakend = \"x\"\n")),
            "gnomon.toml:3: unknown key \"bakend\" (did you mean \"backend\"?)");
  EXPECT_EQ(ErrorOf(Config("[server]\nport = 1\n")), "gnomon.toml:1: unknown key \"server\"");
}

TEST(ServeConfigTest, UnknownKeyInSchedulerAndDefaults) {
  EXPECT_EQ(ErrorOf(Config("[scheduler]\nlease_ttl = \"10s\"\nlease = \"5s\"\n")),
            "gnomon.toml:3: scheduler: unknown key \"lease\"");
  EXPECT_EQ(ErrorOf(Config("[defaults]\nretries = 1\ntimout = \"1s\"\n")),
            "gnomon.toml:3: defaults: unknown key \"timout\" (did you mean \"timeout\"?)");
}

TEST(ServeConfigTest, WrongTypesNameTheKey) {
  EXPECT_EQ(ErrorOf(Config("backend = 5\n")),
            "gnomon.toml:1: backend: expected a string, got integer");
  EXPECT_EQ(ErrorOf(Config("allow_unsafe_backend = \"yes\"\n")),
            "gnomon.toml:1: allow_unsafe_backend: expected true or false, got string");
  EXPECT_EQ(ErrorOf(Config("jobs = \"a.toml\"\n")),
            "gnomon.toml:1: jobs: expected an array of strings, got string");
  EXPECT_EQ(ErrorOf(Config("crontab = [1]\n")),
            "gnomon.toml:1: crontab[0]: expected a string, got integer");
  EXPECT_EQ(ErrorOf(Config("scheduler = 3\n")),
            "gnomon.toml:1: scheduler: expected a table, got integer");
  EXPECT_EQ(ErrorOf(Config("[scheduler]\nworker_threads = \"8\"\n")),
            "gnomon.toml:2: scheduler: worker_threads: expected an integer, got string");
  EXPECT_EQ(ErrorOf(Config("[scheduler]\nlease_ttl = 30\n")),
            "gnomon.toml:2: scheduler: lease_ttl: expected a duration string such as \"30s\", "
            "got integer");
  EXPECT_EQ(ErrorOf(Config("[[defaults]]\nretries = 1\n")),
            "gnomon.toml:1: defaults: expected a table, got array");
  EXPECT_EQ(ErrorOf(Config("[job]\nid = \"x\"\n")),
            "gnomon.toml:1: job: expected an array of tables ([[job]]), got table");
}

TEST(ServeConfigTest, ValuesAreChecked) {
  EXPECT_THAT(ErrorOf(Config("log_format = \"xml\"\n")),
              "gnomon.toml:1: log_format: \"xml\" is not one of text, json");
  EXPECT_THAT(ErrorOf(Config("log_level = \"loud\"\n")),
              HasSubstr("gnomon.toml:1: log_level: \"loud\" is not one of debug"));
  EXPECT_EQ(ErrorOf(Config("node_id = \"a b\"\n")),
            "gnomon.toml:1: node_id: \"a b\" must match [A-Za-z0-9_.-]{1,128}");
  EXPECT_THAT(ErrorOf(Config("listen = \"localhost\"\n")),
              HasSubstr("gnomon.toml:1: listen: \"localhost\": missing :port"));
  EXPECT_THAT(ErrorOf(Config("listen = \"localhost:99999\"\n")),
              HasSubstr("port must be a number 0-65535"));
  EXPECT_THAT(ErrorOf(Config("\nbackend = \"mysql://db/x\"\n")),
              HasSubstr("gnomon.toml:2: backend: unknown scheme \"mysql\"; supported: "));
  EXPECT_EQ(ErrorOf(Config("[scheduler]\nworker_threads = 0\n")),
            "gnomon.toml:2: scheduler: worker_threads: 0 is out of range 1-1024");
  EXPECT_EQ(ErrorOf(Config("[scheduler]\nworker_threads = 99999999999\n")),
            "gnomon.toml:2: scheduler: worker_threads: 99999999999 is out of range");
  EXPECT_EQ(ErrorOf(Config("[scheduler]\nlease_ttl = \"500ms\"\n")),
            "gnomon.toml:2: scheduler: lease_ttl: 500ms is out of range 1s to 1h");
  EXPECT_EQ(ErrorOf(Config("[scheduler]\nlease_ttl = \"2s\"\nheartbeat_interval = \"5s\"\n")),
            "gnomon.toml:1: scheduler: heartbeat_interval: 5s must be less than lease_ttl (2s)");
  EXPECT_THAT(ErrorOf(Config("[scheduler]\nshutdown_grace = \"-1s\"\n")),
              HasSubstr("gnomon.toml:2: scheduler: shutdown_grace: invalid duration \"-1s\": "
                        "negative durations are not allowed"));
  EXPECT_THAT(ErrorOf(Config("jobs = [\"\"]\n")), HasSubstr("jobs: empty file name"));
}

TEST(ServeConfigTest, TomlSyntaxErrorHasFileAndLine) {
  EXPECT_THAT(ErrorOf(Config("backend = \"x\"\nlisten = \n")), HasSubstr("gnomon.toml:2: "));
  EXPECT_THAT(ErrorOf(Config("a = 1\nlisten = \"x:1\"\nlisten = \"y:2\"\n")),
              HasSubstr("gnomon.toml:3: "));
  // Invalid UTF-8.
  EXPECT_THAT(ErrorOf(Config("listen = \"\xff\xfe\"\n")), HasSubstr("gnomon.toml:1: "));
}

TEST(ServeConfigTest, HostileInputIsRejectedWithoutCrashing) {
  // Nested 100 000 deep.
  const std::string deep = "a = " + std::string(100000, '[') + std::string(100000, ']') + "\n";
  EXPECT_THAT(ErrorOf(Config(deep)), HasSubstr("gnomon.toml:1: "));
  // A NUL byte.
  EXPECT_THAT(ErrorOf(Config(std::string("listen = \"a\0b:1\"\n", 17))),
              HasSubstr("gnomon.toml:1"));
  // A job id of 10 000 characters is cut in the message.
  const std::string m = ErrorOf(Jobs("[[job]]\nid = \"" + std::string(10000, 'x') +
                                     "{\"\nschedule = \"@daily\"\ncommand = \"x\"\n"));
  EXPECT_THAT(m, HasSubstr("must match [A-Za-z0-9_.-]{1,128}"));
  EXPECT_LT(m.size(), 600u);
}

TEST(ServeConfigTest, OversizedFileIsRejected) {
  TempDir dir;
  const std::string path = dir.Write("big.toml", std::string(kMaxConfigFileBytes + 1, '#'));
  Result<ServeConfig> c = LoadServeConfig(path);
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(ErrorOf(c), HasSubstr("larger than 16 MiB"));
}

TEST(ServeConfigTest, DefaultsCannotSetIdAndAreValidated) {
  EXPECT_EQ(ErrorOf(Config("[defaults]\nid = \"x\"\n")),
            "gnomon.toml:2: defaults: id: a job id cannot have a default");
  EXPECT_EQ(ErrorOf(Config("[defaults]\nretries = -1\n")),
            "gnomon.toml:1: defaults: retries: -1 is out of range 0-100");
  EXPECT_THAT(ErrorOf(Config("[defaults]\ntimezone = \"Mars/Olympus\"\n")),
              HasSubstr("gnomon.toml:1: defaults: timezone: "));
}

TEST(ServeConfigTest, MissingIncludeNamesTheConfigLine) {
  TempDir dir;
  const std::string config = dir.Write("gnomon.toml", "\njobs = [\"nope.toml\"]\n");
  Result<ServeConfig> c = LoadServeConfig(config);
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(ErrorOf(c),
              HasSubstr(config + ":2: jobs: " + dir.path() + "/nope.toml: cannot read"));
}

TEST(ServeConfigTest, ErrorInIncludedFileNamesThatFile) {
  TempDir dir;
  const std::string config = dir.Write("gnomon.toml", "jobs = [\"j.toml\"]\n");
  dir.Write("j.toml",
            "[[job]]\nid = \"a\"\nschedule = \"@daily\"\ncommand = \"x\"\nretries = \"2\"\n");
  EXPECT_EQ(ErrorOf(LoadServeConfig(config)),
            dir.path() + "/j.toml:5: job \"a\": retries: expected an integer, got string");
}

TEST(ServeConfigTest, DuplicateIdsAcrossFilesNameBothPlaces) {
  TempDir dir;
  const std::string config = dir.Write("gnomon.toml", R"(jobs = ["j.toml"]
[[job]]
id = "report"
schedule = "@daily"
command = "x"
)");
  dir.Write("j.toml", "\n\n[[job]]\nid = \"report\"\nschedule = \"@hourly\"\ncommand = \"y\"\n");
  Result<ServeConfig> c = LoadServeConfig(config);
  EXPECT_EQ(c.status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(ErrorOf(c), dir.path() + "/j.toml:3: job \"report\": duplicate id, first defined at " +
                            config + ":2");
}

TEST(ServeConfigTest, MissingConfigFileIsNotFound) {
  Result<ServeConfig> c = LoadServeConfig("/nonexistent/gnomon.toml");
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(ErrorOf(c), HasSubstr("/nonexistent/gnomon.toml: cannot read"));
}

TEST(ServeConfigTest, AddJobFilesIsAllOrNothing) {
  TempDir dir;
  const std::string good = dir.Write("good.toml", "[[job]]\nid = \"a\"\nschedule = \"@daily\"\n");
  const std::string bad = dir.Write("bad.toml", "[[job]]\nid = \"a\"\nschedule = \"@daily\"\n");
  const std::string tab = dir.Write("tab", "@hourly echo hi\n");
  Result<ServeConfig> c = Config("[defaults]\ncommand = \"true\"\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ServeConfig config = *c;
  ASSERT_TRUE(AddJobFiles(&config, {good}, {tab}).ok());
  ASSERT_EQ(config.jobs.size(), 2u);
  EXPECT_EQ(config.jobs[0].spec.command, "true");
  EXPECT_EQ(config.jobs[1].spec.id, "tab-1");
  EXPECT_THAT(config.jobs_files, ElementsAre(good));
  EXPECT_THAT(config.crontab_files, ElementsAre(tab));

  const ServeConfig before = config;
  EXPECT_EQ(ErrorOf(AddJobFiles(&config, {bad}, {})),
            bad + ":1: job \"a\": duplicate id, first defined at " + good + ":1");
  EXPECT_EQ(config.jobs.size(), before.jobs.size());
  EXPECT_EQ(config.jobs_files, before.jobs_files);
}

TEST(ServeConfigTest, ValidateServeConfigChecksOverrides) {
  ServeConfig c;
  c.backend = "redis://user:hunter2@:6379";
  const std::string m = ErrorOf(ValidateServeConfig(c));
  EXPECT_THAT(m, HasSubstr("backend: redis: "));
  EXPECT_THAT(m, Not(HasSubstr("hunter2")));
  c = ServeConfig{};
  c.node_id = "bad/id";
  EXPECT_THAT(ErrorOf(ValidateServeConfig(c)), HasSubstr("node_id: "));
  c = ServeConfig{};
  c.scheduler.worker_threads = 5000;
  EXPECT_EQ(ErrorOf(ValidateServeConfig(c)),
            "scheduler: worker_threads: 5000 is out of range 1-1024");
}

// ---------------------------------------------------------------------------------------------
// Jobs files

TEST(JobsFileTest, EveryKeyRoundTrips) {
  Result<std::vector<JobSpec>> jobs = Jobs(R"(
[[job]]
id = "monthly-settlement"
schedule = "0 0 2 1 * *"
timezone = "Asia/Shanghai"
command = "/opt/settle --month=prev"
timeout = "30m"
retries = 2
retry_backoff = "10s"
overlap = "replace"
misfire = "all"
catchup_window = "2h"
on_lost = "rerun"
shards = 4
max_consecutive_failures = 3
enabled = false
description = "Month-end settlement"
env = { SETTLE_MODE = "strict", B = "2" }
kill_grace = "15s"
history_keep = 50
history_max_age = "30d"
params = { month = "prev", n = 3, ratio = 0.5, dry = true, at = 2026-11-01, list = [1, "a"], o = { x = 1 } }

[[job]]
id = "argv-job"
schedule = "@every 1h30m"
argv = ["/opt/settle", "--month=prev"]

[[job]]
id = "http-job"
schedule = "H * * * *"
http = { url = "http://127.0.0.1:9000/settle", method = "POST", headers = { X-Team = "fin", X-B = "b" } }
)");
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 3u);
  const JobSpec& j = (*jobs)[0];
  EXPECT_EQ(j.id, "monthly-settlement");
  EXPECT_EQ(j.schedule, "0 0 2 1 * *");
  EXPECT_EQ(j.timezone, "Asia/Shanghai");
  EXPECT_EQ(j.command, "/opt/settle --month=prev");
  EXPECT_TRUE(j.argv.empty());
  EXPECT_FALSE(j.http.has_value());
  EXPECT_EQ(j.timeout, minutes(30));
  EXPECT_EQ(j.retries, 2);
  EXPECT_EQ(j.retry_backoff, seconds(10));
  EXPECT_EQ(j.overlap, OverlapPolicy::kReplace);
  EXPECT_EQ(j.misfire, MisfirePolicy::kAll);
  EXPECT_EQ(j.catchup_window, hours(2));
  EXPECT_EQ(j.on_lost, LostPolicy::kRerun);
  EXPECT_EQ(j.shards, 4);
  EXPECT_EQ(j.max_consecutive_failures, 3);
  EXPECT_FALSE(j.enabled);
  EXPECT_EQ(j.description, "Month-end settlement");
  EXPECT_EQ(j.env, (std::map<std::string, std::string>{{"B", "2"}, {"SETTLE_MODE", "strict"}}));
  EXPECT_EQ(j.kill_grace, seconds(15));
  EXPECT_EQ(j.history_keep, 50);
  EXPECT_EQ(j.history_max_age, hours(24 * 30));
  EXPECT_EQ(j.params,
            R"({"at":"2026-11-01","dry":true,"list":[1,"a"],"month":"prev","n":3,"o":{"x":1},)"
            R"("ratio":0.5})");
  EXPECT_EQ(j.source, "jobs.toml:2");
  EXPECT_TRUE(j.read_only);
  EXPECT_FALSE(j.in_process);

  const JobSpec& a = (*jobs)[1];
  EXPECT_THAT(a.argv, ElementsAre("/opt/settle", "--month=prev"));
  EXPECT_EQ(a.command, "");
  EXPECT_EQ(a.source, "jobs.toml:24");
  EXPECT_EQ(a.params, "");
  // Built-in defaults for keys that are absent.
  EXPECT_EQ(a.timezone, "UTC");
  EXPECT_EQ(a.timeout, Duration(0));
  EXPECT_EQ(a.retry_backoff, seconds(10));
  EXPECT_EQ(a.overlap, OverlapPolicy::kForbid);
  EXPECT_EQ(a.misfire, MisfirePolicy::kOnce);
  EXPECT_EQ(a.catchup_window, hours(1));
  EXPECT_EQ(a.on_lost, LostPolicy::kFail);
  EXPECT_EQ(a.shards, 1);
  EXPECT_TRUE(a.enabled);
  EXPECT_EQ(a.history_keep, 100);

  const JobSpec& h = (*jobs)[2];
  ASSERT_TRUE(h.http.has_value());
  EXPECT_EQ(h.http->url, "http://127.0.0.1:9000/settle");
  EXPECT_EQ(h.http->method, "POST");
  EXPECT_EQ(h.http->headers, (std::map<std::string, std::string>{{"X-B", "b"}, {"X-Team", "fin"}}));
}

TEST(JobsFileTest, HttpAsSubTableAndDefaultMethod) {
  Result<std::vector<JobSpec>> jobs = Jobs(R"([[job]]
id = "h"
schedule = "@daily"
[job.http]
url = "https://example.com/hook"
[job.http.headers]
X-A = "1"
)");
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  EXPECT_EQ((*jobs)[0].http->method, "POST");
  EXPECT_EQ((*jobs)[0].http->headers.at("X-A"), "1");
}

TEST(JobsFileTest, UnknownKeysAreErrorsWithFileAndLine) {
  EXPECT_EQ(ErrorOf(Jobs("[[job]]\nid = \"report\"\nschedulle = \"@daily\"\n")),
            "jobs.toml:3: job \"report\": unknown key \"schedulle\" (did you mean \"schedule\"?)");
  EXPECT_EQ(ErrorOf(Jobs("[[job]]\nid = \"r\"\nschedule = \"@daily\"\n"
                         "http = { url = \"http://x/\", bogus = 1 }\n")),
            "jobs.toml:4: job \"r\": http: unknown key \"bogus\"");
  EXPECT_EQ(ErrorOf(Jobs("[[job]]\nid = \"r\"\nschedule = \"@daily\"\n"
                         "[job.http]\nurl = \"http://x/\"\n\nmethd = \"GET\"\n")),
            "jobs.toml:7: job \"r\": http: unknown key \"methd\" (did you mean \"method\"?)");
  EXPECT_EQ(ErrorOf(Jobs("[defaults]\nretries = 1\nbogus = true\n")),
            "jobs.toml:3: defaults: unknown key \"bogus\"");
  EXPECT_EQ(ErrorOf(Jobs("jobs = []\n")),
            "jobs.toml:1: unknown key \"jobs\" (did you mean \"job\"?)");
  // In the config file's inline jobs too.
  EXPECT_EQ(ErrorOf(Config("[[job]]\nid = \"x\"\n\ncmd = \"y\"\n")),
            "gnomon.toml:4: job \"x\": unknown key \"cmd\"");
}

TEST(JobsFileTest, WrongTypesNameTheKey) {
  const std::string head = "[[job]]\nid = \"a\"\nschedule = \"@daily\"\ncommand = \"x\"\n";
  auto err = [&](const std::string& line) { return ErrorOf(Jobs(head + line + "\n")); };
  EXPECT_EQ(err("retries = \"3\""),
            "jobs.toml:5: job \"a\": retries: expected an integer, got string");
  EXPECT_EQ(err("retries = 1.5"),
            "jobs.toml:5: job \"a\": retries: expected an integer, got float");
  EXPECT_EQ(err("shards = nan"), "jobs.toml:5: job \"a\": shards: expected an integer, got float");
  EXPECT_EQ(err("timeout = 30"),
            "jobs.toml:5: job \"a\": timeout: expected a duration string such as \"30s\", got "
            "integer");
  EXPECT_EQ(err("enabled = \"yes\""),
            "jobs.toml:5: job \"a\": enabled: expected true or false, got string");
  EXPECT_EQ(err("description = 1979-05-27"),
            "jobs.toml:5: job \"a\": description: expected a string, got date");
  EXPECT_EQ(err("env = { A = 1 }"),
            "jobs.toml:5: job \"a\": env.A: expected a string, got integer");
  EXPECT_EQ(err("env = [\"A=1\"]"),
            "jobs.toml:5: job \"a\": env: expected a table of strings, got array");
  EXPECT_EQ(err("overlap = true"),
            "jobs.toml:5: job \"a\": overlap: expected a string, got boolean");
  EXPECT_EQ(err("overlap = \"sometimes\""),
            "jobs.toml:5: job \"a\": overlap: \"sometimes\" is not one of forbid, allow, replace, "
            "buffer_one, buffer_all");
  EXPECT_EQ(ErrorOf(Jobs("[[job]]\nid = \"a\"\nschedule = \"@daily\"\nargv = [\"x\", 2]\n")),
            "jobs.toml:4: job \"a\": argv[1]: expected a string, got integer");
  EXPECT_EQ(ErrorOf(Jobs("[[job]]\nid = \"a\"\nschedule = \"@daily\"\nhttp = \"http://x\"\n")),
            "jobs.toml:4: job \"a\": http: expected a table {url, method, headers}, got string");
  EXPECT_EQ(
      ErrorOf(Jobs("[[job]]\nid = \"a\"\nschedule = \"@daily\"\nhttp = { method = \"GET\" }\n")),
      "jobs.toml:4: job \"a\": http.url: is required");
  EXPECT_EQ(err("params = \"month=prev\""),
            "jobs.toml:5: job \"a\": params: expected a table, got string");
  EXPECT_EQ(err("params = { x = inf }"),
            "jobs.toml:5: job \"a\": params.x: JSON has no nan or inf");
  EXPECT_EQ(err("params = { x = \"" + std::string(kMaxParamsBytes, 'x') + "\" }"),
            "jobs.toml:5: job \"a\": params: 16392 bytes is larger than 16 KiB");
  EXPECT_EQ(ErrorOf(Jobs("[[job]]\nid = 7\nschedule = \"@daily\"\n")),
            "jobs.toml:2: job #1: id: expected a string, got integer");
  EXPECT_EQ(ErrorOf(Jobs("job = [1]\n")),
            "jobs.toml:1: job[0]: expected a table ([[job]]), got integer");
}

TEST(JobsFileTest, InvalidDurationsAreRejected) {
  const std::string head = "[[job]]\nid = \"a\"\nschedule = \"@daily\"\ncommand = \"x\"\n";
  for (const char* bad : {"-5s", "NaN", "nan", "5x", "", "999999999999d", "1e3s", "inf"}) {
    SCOPED_TRACE(bad);
    EXPECT_THAT(ErrorOf(Jobs(head + "timeout = \"" + bad + "\"\n")),
                HasSubstr("jobs.toml:5: job \"a\": timeout: invalid duration"));
  }
  // In range of the grammar but out of the job's bounds: ValidateJobSpec, at the job's line.
  EXPECT_EQ(ErrorOf(Jobs(head + "retry_backoff = \"1h\"\n")),
            "jobs.toml:1: job \"a\": retry_backoff: 1h is out of range 1ms to 10m");
  EXPECT_EQ(ErrorOf(Jobs(head + "retry_backoff = \"0s\"\n")),
            "jobs.toml:1: job \"a\": retry_backoff: 0s is out of range 1ms to 10m");
}

TEST(JobsFileTest, OutOfRangeNumbersAreRejected) {
  const std::string head = "\n[[job]]\nid = \"a\"\nschedule = \"@daily\"\ncommand = \"x\"\n";
  EXPECT_EQ(ErrorOf(Jobs(head + "retries = -1\n")),
            "jobs.toml:2: job \"a\": retries: -1 is out of range 0-100");
  EXPECT_EQ(ErrorOf(Jobs(head + "retries = 101\n")),
            "jobs.toml:2: job \"a\": retries: 101 is out of range 0-100");
  EXPECT_EQ(ErrorOf(Jobs(head + "retries = 9223372036854775807\n")),
            "jobs.toml:6: job \"a\": retries: 9223372036854775807 is out of range");
  EXPECT_EQ(ErrorOf(Jobs(head + "shards = 0\n")),
            "jobs.toml:2: job \"a\": shards: 0 is out of range 1-1024");
  EXPECT_EQ(ErrorOf(Jobs(head + "history_keep = -5\n")),
            "jobs.toml:2: job \"a\": history_keep: -5 is out of range 1-100000");
  EXPECT_EQ(ErrorOf(Jobs(head + "max_consecutive_failures = -1\n")),
            "jobs.toml:2: job \"a\": max_consecutive_failures: -1 is out of range 0-1000000");
  // Beyond int64: a TOML error, still located.
  EXPECT_THAT(ErrorOf(Jobs(head + "retries = 99999999999999999999\n")), HasSubstr("jobs.toml:6: "));
}

TEST(JobsFileTest, ScheduleErrorsCarryLineAndColumn) {
  const std::string m =
      ErrorOf(Jobs("\n\n[[job]]\nid = \"report\"\nschedule = \"0 25 * * *\"\ncommand = \"x\"\n"));
  EXPECT_THAT(m, HasSubstr("jobs.toml:3: job \"report\": schedule: hour: 25 is out of range 0-23"));
  EXPECT_THAT(m, HasSubstr("(column 3)"));
  EXPECT_THAT(ErrorOf(Jobs("[[job]]\nid = \"r\"\nschedule = \"@daily\"\ncommand = \"x\"\n"
                           "timezone = \"../../etc/passwd\"\n")),
              HasSubstr("jobs.toml:1: job \"r\": timezone: "));
}

TEST(JobsFileTest, MissingIdOrExecutor) {
  EXPECT_EQ(ErrorOf(Jobs("[[job]]\nschedule = \"@daily\"\ncommand = \"x\"\n")),
            "jobs.toml:1: job #1: id: is required");
  EXPECT_EQ(ErrorOf(Jobs("[[job]]\nid = \"ok\"\nschedule = \"@daily\"\ncommand = \"x\"\n"
                         "[[job]]\ncommand = \"x\"\n")),
            "jobs.toml:5: job #2: id: is required");
  // No schedule: a job that fires only as a child, by a trigger or by a backfill.
  Result<std::vector<JobSpec>> unscheduled = Jobs("[[job]]\nid = \"a\"\ncommand = \"x\"\n");
  ASSERT_TRUE(unscheduled.ok()) << unscheduled.status().ToString();
  EXPECT_EQ(unscheduled->at(0).schedule, "");
  EXPECT_EQ(ErrorOf(Jobs("[[job]]\nid = \"a\"\nschedule = \"@daily\"\n")),
            "jobs.toml:1: job \"a\": command: a job needs one of command, argv or http");
  EXPECT_EQ(ErrorOf(Jobs("[[job]]\nid = \"a\"\nschedule = \"@daily\"\ncommand = \"x\"\n"
                         "argv = [\"y\"]\n")),
            "jobs.toml:1: job \"a\": command: use only one of command, argv and http");
  EXPECT_THAT(ErrorOf(Jobs("[[job]]\nid = \"a/b\"\nschedule = \"@daily\"\ncommand = \"x\"\n")),
              HasSubstr("jobs.toml:1: id: \"a/b\" must match"));
}

TEST(JobsFileTest, DuplicateIdsInOneFile) {
  EXPECT_EQ(ErrorOf(Jobs("[[job]]\nid = \"a\"\nschedule = \"@daily\"\ncommand = \"x\"\n\n"
                         "[[job]]\nid = \"a\"\nschedule = \"@daily\"\ncommand = \"x\"\n")),
            "jobs.toml:6: job \"a\": duplicate id, first defined at jobs.toml:1");
}

TEST(JobsFileTest, LayersBuiltinsDefaultsAndJob) {
  JobSpec base;
  base.retries = 1;
  base.timeout = seconds(7);
  base.env = {{"A", "base"}, {"B", "base"}};
  base.argv = {"/bin/base"};
  Result<std::vector<JobSpec>> jobs = Jobs(R"([defaults]
retries = 3
env = { B = "file", C = "file" }

[[job]]
id = "a"
schedule = "@daily"
env = { C = "job" }

[[job]]
id = "b"
schedule = "@daily"
retries = 0
command = "echo"
)",
                                           base);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  const JobSpec& a = (*jobs)[0];
  EXPECT_EQ(a.retries, 3);
  EXPECT_EQ(a.timeout, seconds(7));
  EXPECT_THAT(a.argv, ElementsAre("/bin/base"));
  EXPECT_EQ(a.env,
            (std::map<std::string, std::string>{{"A", "base"}, {"B", "file"}, {"C", "job"}}));
  const JobSpec& b = (*jobs)[1];
  EXPECT_EQ(b.retries, 0);
  EXPECT_EQ(b.command, "echo");
  EXPECT_TRUE(b.argv.empty());
}

TEST(JobsFileTest, EmptyFileHasNoJobs) {
  Result<std::vector<JobSpec>> jobs = Jobs("# nothing\n");
  ASSERT_TRUE(jobs.ok());
  EXPECT_TRUE(jobs->empty());
}

TEST(JobsFileTest, LoadJobsFileReadsTheFile) {
  TempDir dir;
  const std::string path =
      dir.Write("j.toml", "[[job]]\nid = \"a\"\nschedule = \"@daily\"\ncommand = \"x\"\n");
  Result<std::vector<JobSpec>> jobs = server::SpecsOf(LoadJobsFile(path, JobSpec{}));
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  EXPECT_EQ((*jobs)[0].source, path + ":1");
  EXPECT_EQ(LoadJobsFile(dir.path(), JobSpec{}).status().code(), StatusCode::kNotFound);
}

// ---------------------------------------------------------------------------------------------
// Backend URLs

TEST(BackendUrlTest, Sqlite) {
  Result<BackendUrl> u = ParseBackendUrl("sqlite:///var/lib/gnomon/gnomon.db");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->scheme, "sqlite");
  EXPECT_EQ(u->path, "/var/lib/gnomon/gnomon.db");
  u = ParseBackendUrl("sqlite://./gnomon-data/gnomon.db");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->path, "./gnomon-data/gnomon.db");
  EXPECT_TRUE(ParseBackendUrl(kDefaultBackendUrl).ok());
  EXPECT_THAT(ErrorOf(ParseBackendUrl("sqlite://")), HasSubstr("missing the database path"));
  EXPECT_THAT(ErrorOf(ParseBackendUrl("sqlite://gnomon.db")), HasSubstr("must be absolute"));
  EXPECT_THAT(ErrorOf(ParseBackendUrl("sqlite:///var/lib/")), HasSubstr("names a directory"));
}

TEST(BackendUrlTest, Redis) {
  Result<BackendUrl> u = ParseBackendUrl("redis://10.0.0.5:6380/3");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->scheme, "redis");
  EXPECT_THAT(u->hosts, ElementsAre(HostPort{"10.0.0.5", 6380}));
  EXPECT_EQ(u->db, 3);
  EXPECT_EQ(u->user, "");
  EXPECT_EQ(u->password, "");

  u = ParseBackendUrl("redis://gnomon:p%40ss@w/rd@redis.internal");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->user, "gnomon");
  EXPECT_EQ(u->password, "p@ss@w/rd");
  EXPECT_THAT(u->hosts, ElementsAre(HostPort{"redis.internal", 6379}));
  EXPECT_EQ(u->db, 0);

  u = ParseBackendUrl("redis://:secret@[::1]:7000");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->user, "");
  EXPECT_EQ(u->password, "secret");
  EXPECT_THAT(u->hosts, ElementsAre(HostPort{"::1", 7000}));

  EXPECT_THAT(ErrorOf(ParseBackendUrl("redis://h:0")), HasSubstr("port must be a number 1-65535"));
  EXPECT_THAT(ErrorOf(ParseBackendUrl("redis://h:6379/x")), HasSubstr("database \"x\""));
  EXPECT_THAT(ErrorOf(ParseBackendUrl("redis://a:1,b:2")), HasSubstr("exactly one host"));
  EXPECT_THAT(ErrorOf(ParseBackendUrl("redis://")), HasSubstr("missing host"));
  EXPECT_THAT(ErrorOf(ParseBackendUrl("redis://h o:1")), HasSubstr("invalid character"));
  EXPECT_THAT(ErrorOf(ParseBackendUrl("redis://u:%zz@h")), HasSubstr("percent-encoding"));
}

// redis+cluster:// and rediss+cluster://: the seeds (default port 6379), credentials, TLS and
// wait_replicas; no path.
TEST(BackendUrlTest, Cluster) {
  Result<BackendUrl> u = ParseBackendUrl("redis+cluster://u:p%40ss@n1:7000,n2,[::1]:7002");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->scheme, "redis+cluster");
  EXPECT_THAT(u->hosts,
              ElementsAre(HostPort{"n1", 7000}, HostPort{"n2", 6379}, HostPort{"::1", 7002}));
  Result<RedisOptions> o =
      server::RedisOptionsFor("redis+cluster://u:p%40ss@n1:7000,n2,[::1]:7002", false);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->cluster_seeds,
            (std::vector<std::pair<std::string, int>>{{"n1", 7000}, {"n2", 6379}, {"::1", 7002}}));
  EXPECT_EQ(o->user, "u");
  EXPECT_EQ(o->password, "p@ss");
  EXPECT_FALSE(o->tls.enabled);
  EXPECT_TRUE(o->sentinels.empty());
  o = server::RedisOptionsFor("rediss+cluster://n1:7000?tls_verify=false", false);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_TRUE(o->tls.enabled);
  EXPECT_FALSE(o->tls.verify);
  EXPECT_THAT(ErrorOf(ParseBackendUrl("redis+cluster://n1:7000/0")),
              HasSubstr("no database or name"));
  o = server::RedisOptionsFor("redis+cluster://n1:7000?wait_replicas=1", false);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->wait_replicas, 1);
  EXPECT_THAT(ErrorOf(ParseBackendUrl("redis+cluster://n1:7000?tls_verify=false")),
              HasSubstr("tls_verify"));
  EXPECT_THAT(ErrorOf(ParseBackendUrl("redis+cluster://")), HasSubstr("missing host"));
  EXPECT_THAT(ErrorOf(ParseBackendUrl("redis+cluster://:secret@n1:0")), Not(HasSubstr("secret")));
}

TEST(BackendUrlTest, SentinelAndEtcd) {
  Result<BackendUrl> u = ParseBackendUrl("redis+sentinel://s1:26379,s2:26380,s3/mymaster");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->scheme, "redis+sentinel");
  EXPECT_THAT(u->hosts,
              ElementsAre(HostPort{"s1", 26379}, HostPort{"s2", 26380}, HostPort{"s3", 26379}));
  EXPECT_EQ(u->master, "mymaster");
  EXPECT_THAT(ErrorOf(ParseBackendUrl("redis+sentinel://s1:26379")),
              HasSubstr("missing the master name"));
  // wait_replicas reaches the Redis options through either Redis form.
  u = ParseBackendUrl("redis+sentinel://s1/mymaster?wait_replicas=1");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->wait_replicas, 1);
  EXPECT_EQ(u->master, "mymaster");
  Result<RedisOptions> o =
      server::RedisOptionsFor("redis+sentinel://s1/mymaster?wait_replicas=1", false);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->wait_replicas, 1);
  o = server::RedisOptionsFor("redis://h:6380?wait_replicas=2", false);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->wait_replicas, 2);
  EXPECT_THAT(ErrorOf(ParseBackendUrl("redis+sentinel://s1/m?wait_replicas=99")),
              HasSubstr("wait_replicas"));
  // fire_retention the same way, through every Redis form; the default without it.
  for (const char* url : {"redis+sentinel://s1/m?fire_retention=3h", "redis://h?fire_retention=3h",
                          "redis+cluster://n1:7000?fire_retention=3h"}) {
    o = server::RedisOptionsFor(url, false);
    ASSERT_TRUE(o.ok()) << url << ": " << o.status().ToString();
    EXPECT_EQ(o->fire_retention, std::chrono::hours(3)) << url;
  }
  EXPECT_EQ(server::RedisOptionsFor("redis+cluster://n1:7000", false)->fire_retention,
            RedisOptions{}.fire_retention);
  EXPECT_THAT(ErrorOf(ParseBackendUrl("redis+cluster://n1?fire_retention=10m")),
              HasSubstr("fire_retention"));

  u = ParseBackendUrl("etcd://h1:2379,h2:2379");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->scheme, "etcd");
  EXPECT_THAT(u->hosts, ElementsAre(HostPort{"h1", 2379}, HostPort{"h2", 2379}));
  u = ParseBackendUrl("etcd://127.0.0.1");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_THAT(u->hosts, ElementsAre(HostPort{"127.0.0.1", 2379}));
  EXPECT_THAT(ErrorOf(ParseBackendUrl("etcd://h1:2379,")), HasSubstr("missing host"));
  // A key prefix (several clusters in one etcd), and TLS: https:// on every endpoint.
  EXPECT_TRUE(ParseBackendUrl("etcd://h1:2379/x").ok());
  u = ParseBackendUrl("etcd://u:p%40w@https://h1:2379,https://h2/pre?tls_ca=/ca.pem");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_THAT(u->hosts, ElementsAre(HostPort{"h1", 2379}, HostPort{"h2", 2379}));
  EXPECT_EQ(u->password, "p@w");
  EXPECT_TRUE(u->tls.enabled);
  EXPECT_EQ(u->tls.ca_file, "/ca.pem");
  EXPECT_THAT(ErrorOf(ParseBackendUrl("etcd://https://h1:2379,h2:2379")),
              HasSubstr("either every endpoint is https:// or none"));
  EXPECT_THAT(ErrorOf(ParseBackendUrl("etcd://h1:2379?tls_ca=/ca.pem")),
              HasSubstr("write the endpoints as https://host:port"));
  EXPECT_THAT(ErrorOf(ParseBackendUrl("etcd://https://h1?tls_server_name=x")),
              HasSubstr("tls_server_name is not supported"));
  EXPECT_THAT(ErrorOf(ParseBackendUrl("etcd://https://h1?tls_cert=/c.pem")),
              HasSubstr("tls_cert and tls_key go together"));
  EXPECT_THAT(ErrorOf(ParseBackendUrl("etcd://h1 x:2379")), HasSubstr("space"));
}

TEST(BackendUrlTest, RedisOverTls) {
  Result<BackendUrl> u = ParseBackendUrl(
      "rediss://gnomon:p?ss@10.0.0.5:6380/3?tls_ca=/etc/gnomon/"
      "ca.pem&tls_server_name=redis.internal");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->scheme, "rediss");
  EXPECT_EQ(u->password, "p?ss");
  EXPECT_THAT(u->hosts, ElementsAre(HostPort{"10.0.0.5", 6380}));
  EXPECT_EQ(u->db, 3);
  EXPECT_TRUE(u->tls.enabled);
  EXPECT_TRUE(u->tls.verify);
  EXPECT_EQ(u->tls.ca_file, "/etc/gnomon/ca.pem");
  EXPECT_EQ(u->tls.server_name, "redis.internal");

  u = ParseBackendUrl(
      "rediss+sentinel://s1,s2:26380/mymaster?tls_cert=/c.pem&tls_key=/k.pem&tls_verify=false");
  ASSERT_TRUE(u.ok()) << u.status().ToString();
  EXPECT_EQ(u->scheme, "rediss+sentinel");
  EXPECT_THAT(u->hosts, ElementsAre(HostPort{"s1", 26379}, HostPort{"s2", 26380}));
  EXPECT_EQ(u->master, "mymaster");
  EXPECT_TRUE(u->tls.enabled);
  EXPECT_FALSE(u->tls.verify);
  EXPECT_EQ(u->tls.cert_file, "/c.pem");
  EXPECT_EQ(u->tls.key_file, "/k.pem");
  Result<RedisOptions> o = server::RedisOptionsFor(
      "rediss+sentinel://:pw@s1,s2:26380/mymaster?tls_cert=/c.pem&tls_key=/k.pem", false);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->sentinels.size(), 2u);
  EXPECT_EQ(o->password, "pw");
  EXPECT_TRUE(o->tls.enabled);
  EXPECT_EQ(o->tls.cert_file, "/c.pem");
  o = server::RedisOptionsFor("rediss://h:7000?tls_ca=/ca.pem", false);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->tls.ca_file, "/ca.pem");
  u = ParseBackendUrl("rediss://h");  // defaults: verified, system CAs, the host's name
  ASSERT_TRUE(u.ok());
  EXPECT_TRUE(u->tls.enabled && u->tls.verify && u->tls.ca_file.empty());

  // redis:// and redis+sentinel:// stay plain and take no parameters.
  u = ParseBackendUrl("redis://h:6379");
  ASSERT_TRUE(u.ok());
  EXPECT_FALSE(u->tls.enabled);
  EXPECT_THAT(ErrorOf(ParseBackendUrl("redis://h?tls_ca=/ca.pem")), HasSubstr("use rediss://"));
  EXPECT_THAT(ErrorOf(ParseBackendUrl("redis+sentinel://s/m?tls_verify=false")),
              HasSubstr("use rediss://"));
  // Unknown parameters are named.
  EXPECT_THAT(ErrorOf(ParseBackendUrl("rediss://h?tls_ca=/a&sslmode=require")),
              HasSubstr("unknown query parameter \"sslmode\""));
  EXPECT_THAT(ErrorOf(ParseBackendUrl("rediss+sentinel://s/m?tls_key=/k")),
              HasSubstr("tls_cert and tls_key go together"));
  EXPECT_THAT(ErrorOf(ParseBackendUrl("rediss://h:1,h:2")), HasSubstr("rediss+sentinel://"));
  EXPECT_THAT(ErrorOf(ParseBackendUrl("rediss://u:hunter2@h?tls_ca=/a@b")),
              AllOf(HasSubstr("%40"), Not(HasSubstr("hunter2"))));
  EXPECT_THAT(ErrorOf(ParseBackendUrl("rediss://u:hunter2@h?x=1")), Not(HasSubstr("hunter2")));
  EXPECT_EQ(RedactUrl("rediss://u:hunter2@h:1/0?tls_ca=/ca.pem"),
            "rediss://u:***@h:1/0?tls_ca=/ca.pem");
}

TEST(BackendUrlTest, UnknownSchemeListsTheSupportedOnes) {
  const std::string m = ErrorOf(ParseBackendUrl("postgres://u:pw@db/gnomon"));
  EXPECT_THAT(m, HasSubstr("unknown scheme \"postgres\""));
  for (const char* s : {"sqlite://", "redis://", "redis+sentinel://", "rediss://",
                        "rediss+sentinel://", "etcd://"}) {
    EXPECT_THAT(m, HasSubstr(s));
  }
  EXPECT_THAT(ErrorOf(ParseBackendUrl("localhost:6379")), HasSubstr("is not a URL"));
}

TEST(BackendUrlTest, ErrorsNeverContainThePassword) {
  for (const char* url :
       {"redis://u:hunter2@", "redis://u:hunter2@h:99999", "redis://u:hunter2@h/x",
        "redis+sentinel://u:hunter2@h", "etcd://u:hunter2@h/", "u:hunter2@h:1",
        "redis://u:hunter2@a:1,b:2", "etcd://u:hunter2@h o"}) {
    SCOPED_TRACE(url);
    EXPECT_THAT(ErrorOf(ParseBackendUrl(url)), Not(HasSubstr("hunter2")));
  }
}

TEST(BackendUrlTest, RedactUrl) {
  EXPECT_EQ(RedactUrl("redis://user:secret@h:6379/0"), "redis://user:***@h:6379/0");
  EXPECT_EQ(RedactUrl("redis://:secret@h:6379"), "redis://:***@h:6379");
  EXPECT_EQ(RedactUrl("redis://secret@h:6379"), "redis://***@h:6379");
  EXPECT_EQ(RedactUrl("redis+sentinel://u:pw@s1:1,s2:2/m"), "redis+sentinel://u:***@s1:1,s2:2/m");
  EXPECT_EQ(RedactUrl("etcd://root:pw@h1:2379"), "etcd://root:***@h1:2379");
  EXPECT_EQ(RedactUrl("redis://h:6379"), "redis://h:6379");
  EXPECT_EQ(RedactUrl("sqlite:///data/a@b.db"), "sqlite:///data/a@b.db");
  EXPECT_EQ(RedactUrl(""), "");
  // Passwords with '@', ':' and '/' in them.
  for (const char* url : {"redis://u:se@cr:et/x@h:1/0", "redis://u:hunter2@", "u:hunter2@h",
                          "redis://u:hunter2@h@i", "redis://hunter2@h"}) {
    SCOPED_TRACE(url);
    EXPECT_THAT(RedactUrl(url), Not(HasSubstr("hunter2")));
    EXPECT_THAT(RedactUrl(url), Not(HasSubstr("cr:et")));
  }
}

}  // namespace
}  // namespace gnomon::app

namespace gnomon::app {
namespace {

TEST(TokenConfigTest, TokensParseAndUnknownKeysAreErrors) {
  Result<ServeConfig> c = ParseServeConfig(
      "[[token]]\nname = \"ops\"\ntoken = \"ops-secret-0123456789\"\nrole = \"admin\"\n"
      "namespaces = [\"billing-\"]\n",
      "gnomon.toml", "");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->tokens.size(), 1u);
  EXPECT_EQ(c->tokens[0].name, "ops");
  EXPECT_EQ(c->tokens[0].secret, "ops-secret-0123456789");
  EXPECT_EQ(c->tokens[0].role, "admin");
  EXPECT_EQ(c->tokens[0].namespaces, std::vector<std::string>{"billing-"});
  Result<ServeConfig> bad =
      ParseServeConfig("[[token]]\nname = \"ops\"\ntokn = \"x\"\nrole = \"read\"\n", "g.toml", "");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("g.toml:3"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("unknown key \"tokn\""), std::string::npos);
  Result<ServeConfig> missing = ParseServeConfig("[[token]]\nname = \"ops\"\n", "g.toml", "");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("required"), std::string::npos);
}

TEST(QuotaConfigTest, QuotasParseAndBadOnesNameTheLine) {
  Result<ServeConfig> c = ParseServeConfig(
      "[[quota]]\nnamespace = \"billing.\"\nmax_jobs = 10\nmax_concurrent_runs = 2\n"
      "[[quota]]\nnamespace = \"etl.\"\nmax_concurrent_runs = 1\n",
      "gnomon.toml", "");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->quotas.size(), 2u);
  EXPECT_EQ(c->quotas[0].ns, "billing.");
  EXPECT_EQ(c->quotas[0].max_jobs, 10);
  EXPECT_EQ(c->quotas[0].max_concurrent_runs, 2);
  EXPECT_EQ(c->quotas[1].ns, "etl.");
  EXPECT_EQ(c->quotas[1].max_jobs, 0);
  EXPECT_EQ(c->quotas[1].source, "gnomon.toml:5");
  struct Bad {
    const char* text;
    const char* message;
  };
  for (const Bad& b : {
           Bad{"[[quota]]\nmax_jobs = 1\n", "gnomon.toml:1: quota: namespace is required"},
           Bad{"[[quota]]\nnamespace = \"a b\"\n", "gnomon.toml:2: quota: namespace: must be"},
           Bad{"[[quota]]\nnamespace = \"a.\"\nmax_jobs = -1\n",
               "gnomon.toml:3: quota: max_jobs: must be >= 0"},
           Bad{"[[quota]]\nnamespace = \"a.\"\nmax_job = 1\n",
               "gnomon.toml:3: quota: unknown key \"max_job\""},
           Bad{"[[quota]]\nnamespace = \"a.\"\n[[quota]]\nnamespace = \"a.\"\n",
               "gnomon.toml:3: quota: namespace \"a.\" already has a quota (gnomon.toml:1)"},
           Bad{"quota = 3\n", "gnomon.toml:1: quota: must be an array of tables"},
       }) {
    Result<ServeConfig> bad = ParseServeConfig(b.text, "gnomon.toml", "");
    ASSERT_FALSE(bad.ok()) << b.text;
    EXPECT_THAT(bad.status().message(), HasSubstr(b.message)) << b.text;
  }
}

TEST(AlertConfigTest, AlertsAndTracingParseAndBadOnesNameTheLine) {
  Result<ServeConfig> c = ParseServeConfig(
      "[tracing]\notlp_endpoint = \"http://127.0.0.1:4318/v1/traces\"\n"
      "[[alert]]\nname = \"pager\"\nurl = \"http://hooks.local/gnomon\"\nsecret = \"s3\"\n"
      "events = [\"run_failed\", \"lost_run\"]\njobs = [\"billing.\"]\n"
      "[[alert]]\nname = \"all\"\nurl = \"http://hooks.local/all\"\n",
      "gnomon.toml", "");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->tracing.otlp_endpoint, "http://127.0.0.1:4318/v1/traces");
  ASSERT_EQ(c->alerts.size(), 2u);
  EXPECT_EQ(c->alerts[0].name, "pager");
  EXPECT_EQ(c->alerts[0].secret, "s3");
  EXPECT_EQ(c->alerts[0].events, (std::vector<std::string>{"run_failed", "lost_run"}));
  EXPECT_EQ(c->alerts[0].jobs, std::vector<std::string>{"billing."});
  EXPECT_TRUE(c->alerts[1].events.empty());
  EXPECT_EQ(c->alerts[1].source, "gnomon.toml:9");
  struct Bad {
    const char* text;
    const char* message;
  };
  for (const Bad& b : {
           Bad{"[[alert]]\nname = \"a\"\n", "gnomon.toml:1: alert: name and url are required"},
           Bad{"[[alert]]\nname = \"a\"\nurl = \"ftp://x\"\n", "gnomon.toml:3: alert: url:"},
           Bad{"[[alert]]\nname = \"a\"\nurl = \"http://x\"\nevents = [\"boom\"]\n",
               "gnomon.toml:4: alert: events: \"boom\" is not one of"},
           Bad{"[[alert]]\nname = \"a\"\nurl = \"http://x\"\nsecrt = \"s\"\n",
               "gnomon.toml:4: alert: unknown key \"secrt\""},
           Bad{"[tracing]\notlp_endpoint = \"grpc://x\"\n",
               "gnomon.toml:2: tracing: otlp_endpoint"},
           Bad{"[tracing]\nendpoint = \"http://x\"\n", "gnomon.toml:2: tracing: unknown key"},
       }) {
    Result<ServeConfig> bad = ParseServeConfig(b.text, "gnomon.toml", "");
    ASSERT_FALSE(bad.ok()) << b.text;
    EXPECT_THAT(bad.status().message(), HasSubstr(b.message)) << b.text;
  }
}

TEST(HttpClientConfigTest, TlsFilesResolveAgainstTheConfigFolderAndGoTogether) {
  Result<ServeConfig> c = ParseServeConfig(
      "[tracing]\notlp_endpoint = \"https://collector.internal:4318/v1/traces\"\n"
      "[http_client]\ntls_ca = \"ca.pem\"\ntls_cert = \"/etc/gnomon/client.pem\"\n"
      "tls_key = \"client.key\"\n",
      "/etc/gnomon/gnomon.toml", "/etc/gnomon");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->tracing.otlp_endpoint, "https://collector.internal:4318/v1/traces");
  EXPECT_EQ(c->http_client.tls_ca, "/etc/gnomon/ca.pem");
  EXPECT_EQ(c->http_client.tls_cert, "/etc/gnomon/client.pem");
  EXPECT_EQ(c->http_client.tls_key, "/etc/gnomon/client.key");
  Result<server::NodeOptions> o = NodeOptionsFor(*c);
  ASSERT_TRUE(o.ok()) << o.status().ToString();
  EXPECT_EQ(o->http_tls.ca_file, "/etc/gnomon/ca.pem");
  EXPECT_EQ(o->http_tls.cert_file, "/etc/gnomon/client.pem");
  EXPECT_EQ(o->http_tls.key_file, "/etc/gnomon/client.key");
  EXPECT_TRUE(o->http_tls.verify);

  struct Bad {
    const char* text;
    const char* message;
  };
  for (const Bad& b : {
           Bad{"[http_client]\ntls_cert = \"c.pem\"\n",
               "gnomon.toml:1: http_client: tls_cert and tls_key go together"},
           Bad{"[http_client]\ntls_ca = \"\"\n", "gnomon.toml:2: http_client: tls_ca: empty"},
           Bad{"[http_client]\nca_file = \"ca.pem\"\n",
               "gnomon.toml:2: http_client: unknown key \"ca_file\""},
           Bad{"http_client = 3\n", "gnomon.toml:1: http_client: must be a table"},
       }) {
    Result<ServeConfig> bad = ParseServeConfig(b.text, "gnomon.toml", "");
    ASSERT_FALSE(bad.ok()) << b.text;
    EXPECT_THAT(bad.status().message(), HasSubstr(b.message)) << b.text;
  }
}

TEST(HttpClientConfigTest, PrivateKeysReadableByOthersAreWarnedAbout) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("gnomon-keys-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string api_key = (dir / "api.key").string();
  const std::string client_key = (dir / "client.key").string();
  for (const std::string& f : {api_key, client_key}) std::ofstream(f) << "-----BEGIN\n";
  ::chmod(api_key.c_str(), 0644);
  ::chmod(client_key.c_str(), 0600);
  ServeConfig c;
  c.api.tls_key = api_key;
  c.http_client.tls_key = client_key;
  std::vector<std::string> warnings = ConfigFileWarnings(c);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0],
              HasSubstr("[api] tls_key " + api_key + " can be read by group or others"));
  ::chmod(client_key.c_str(), 0640);
  warnings = ConfigFileWarnings(c);
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_THAT(warnings[1], HasSubstr("[http_client] tls_key " + client_key));
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gnomon::app

namespace gnomon::app {
namespace {

TEST(CalendarConfigTest, CalendarsFromDatesAndFilesAreReferencedByJobsEverywhere) {
  TempDir dir;
  dir.Write("etc/holidays.txt",
            "# public holidays\n2026-10-01/2026-10-07\n\n  2027-01-01  # new year\n"
            "0 0 0 * * SUN#1\t# first Sundays\n");
  dir.Write("etc/jobs.toml",
            "[[job]]\nid = \"filed\"\nschedule = \"@daily\"\ncommand = \"true\"\n"
            "calendars = [\"cn-holidays\"]\n");
  const std::string path = dir.Write("etc/gnomon.toml", R"(
jobs = ["jobs.toml"]

[[job]]
id = "inline"
schedule = "0 0 2 * * *"
command = "true"
calendars = ["cn-holidays", "closures"]

[[calendar]]
id = "cn-holidays"
file = "holidays.txt"

[[calendar]]
id = "closures"
dates = [2026-12-24, "2026-12-31", "0 0 0 * * 0"]
)");
  Result<ServeConfig> c = LoadServeConfig(path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const Calendars::Calendar* holidays = c->calendars->Find("cn-holidays");
  ASSERT_NE(holidays, nullptr);
  EXPECT_THAT(holidays->entries,
              ElementsAre("2026-10-01/2026-10-07", "2027-01-01", "0 0 0 * * SUN#1"));
  EXPECT_EQ(holidays->source, path + ":10");
  ASSERT_NE(c->calendars->Find("closures"), nullptr);
  EXPECT_THAT(c->calendars->Find("closures")->entries,
              ElementsAre("2026-12-24", "2026-12-31", "0 0 0 * * 0"));
  ASSERT_EQ(c->jobs.size(), 2u);
  for (const CompiledJob& j : c->jobs) {
    ASSERT_NE(j.rules, nullptr) << j.spec.id;
    EXPECT_FALSE(j.rules->Allows(*Instant::ParseRfc3339("2026-10-03T00:00:00Z"))) << j.spec.id;
  }
  EXPECT_TRUE(c->jobs[1].rules->Allows(*Instant::ParseRfc3339("2026-12-24T00:00:00Z")))
      << "the file's job names only cn-holidays";
  EXPECT_FALSE(c->jobs[0].rules->Allows(*Instant::ParseRfc3339("2026-12-24T02:00:00Z")))
      << "02:00 on the 24th";
}

TEST(CalendarConfigTest, BadCalendarsNameTheLine) {
  struct Bad {
    const char* text;
    const char* message;
  };
  for (const Bad& b : {
           Bad{"[[calendar]]\ndates = [\"2026-12-25\"]\n",
               "gnomon.toml:1: calendar: id is required"},
           Bad{"[[calendar]]\nid = \"a\"\ndays = []\n",
               "gnomon.toml:3: calendar: unknown key \"days\""},
           Bad{"[[calendar]]\nid = \"a\"\ndates = [\"2026-12-25\", \"someday\"]\n",
               "gnomon.toml:1: calendar: calendar \"a\": dates[1]: \"someday\" is neither"},
           Bad{"[[calendar]]\nid = \"a\"\n[[calendar]]\nid = \"a\"\n",
               "gnomon.toml:3: calendar: calendar \"a\": duplicate id, first defined at "
               "gnomon.toml:1"},
           Bad{"[[calendar]]\nid = \"a\"\nfile = \"/nonexistent/holidays.txt\"\n",
               "gnomon.toml:3: calendar: file: "},
           Bad{"[[calendar]]\nid = \"a\"\ndates = [3]\n",
               "gnomon.toml:3: calendar: dates: expected a date or a string"},
           Bad{"[[job]]\nid = \"j\"\nschedule = \"@daily\"\ncommand = \"true\"\ncalendars = "
               "[\"x\"]\n",
               "gnomon.toml:1: job \"j\": calendars[0]: \"x\" is not defined"},
           Bad{"calendar = 1\n", "gnomon.toml:1: calendar: must be an array of tables"},
       }) {
    Result<ServeConfig> bad = ParseServeConfig(b.text, "gnomon.toml", "");
    ASSERT_FALSE(bad.ok()) << b.text;
    EXPECT_THAT(bad.status().message(), HasSubstr(b.message)) << b.text;
  }
}

TEST(DependencyConfigTest, AFilesJobsNameJobsOfTheFilesAndCloseNoCycle) {
  const char* const kJobs =
      "[[job]]\nid = \"extract\"\nschedule = \"@daily\"\ncommand = \"true\"\n"
      "on_success = [\"load\"]\n"
      "[[job]]\nid = \"load\"\ncommand = \"true\"\n";  // no schedule: a child only
  Result<ServeConfig> good = ParseServeConfig(kJobs, "gnomon.toml", "");
  ASSERT_TRUE(good.ok()) << good.status().ToString();
  ASSERT_EQ(good->jobs.size(), 2u);
  EXPECT_EQ(DependenciesOf(good->jobs[0].spec).on_success, std::vector<std::string>{"load"});
  EXPECT_TRUE(good->jobs[1].spec.schedule.empty());

  Result<ServeConfig> missing =
      ParseServeConfig(std::string(kJobs) + "on_failure = [\"pager\"]\n", "gnomon.toml", "");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            "gnomon.toml:6: job \"load\": on_failure: \"pager\" is not defined");
  Result<ServeConfig> cycle =
      ParseServeConfig(std::string(kJobs) + "on_complete = [\"extract\"]\n", "gnomon.toml", "");
  ASSERT_FALSE(cycle.ok());
  EXPECT_EQ(cycle.status().message(),
            "gnomon.toml:1: job \"extract\": on_success: a cycle: extract -> load -> extract");
  Result<ServeConfig> sharded = ParseServeConfig(
      "[[job]]\nid = \"s\"\nschedule = \"@daily\"\ncommand = \"true\"\nshards = 2\n"
      "on_success = [\"t\"]\n",
      "gnomon.toml", "");
  ASSERT_FALSE(sharded.ok());
  EXPECT_THAT(sharded.status().message(),
              HasSubstr("on_success: a job with shards > 1 names no children"));
}

}  // namespace
}  // namespace gnomon::app
