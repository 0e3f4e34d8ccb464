#include "src/server/crontab.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "src/server/jobs_file.h"

namespace gnomon::server {
namespace {

using ::testing::HasSubstr;

Result<std::vector<JobSpec>> Tab(std::string_view text, const JobSpec& defaults = {}) {
  return SpecsOf(ParseCrontab(text, "/etc/cron/ops", defaults));
}

std::string ErrorOf(const Result<std::vector<JobSpec>>& r) {
  EXPECT_FALSE(r.ok());
  return r.ok() ? std::string("<ok>") : r.status().message();
}

TEST(CrontabTest, EnvLinesCronTzTabsMacrosAndComments) {
  Result<std::vector<JobSpec>> jobs =
      Tab("# m h dom mon dow command\n"                    // 1
          "SHELL=/bin/bash\n"                              // 2
          "MAILTO=\"ops@example.com\"\n"                   // 3
          "PATH = /usr/local/bin:/usr/bin\n"               // 4
          "\n"                                             // 5
          "*/15\t*  *\t* *\t/usr/bin/poll --all\n"         // 6
          "   # an indented comment\n"                     // 7
          "CRON_TZ=Europe/Berlin\n"                        // 8
          "GREETING='hello world'\n"                       // 9
          "@daily\t/usr/bin/rotate\n"                      // 10
          "30 2 * * MON-FRI  backup.sh >/dev/null 2>&1\n"  // 11
          "CRON_TZ=\n"                                     // 12
          "@every 1h30m sync\n");                          // 13
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 4u);

  const JobSpec& poll = (*jobs)[0];
  EXPECT_EQ(poll.id, "ops-6");
  EXPECT_EQ(poll.schedule, "*/15 * * * *");
  EXPECT_EQ(poll.command, "/usr/bin/poll --all");
  EXPECT_EQ(poll.timezone, "UTC");
  EXPECT_EQ(poll.env, (std::map<std::string, std::string>{{"PATH", "/usr/local/bin:/usr/bin"}}));
  EXPECT_EQ(poll.source, "/etc/cron/ops:6");
  EXPECT_TRUE(poll.read_only);

  const JobSpec& rotate = (*jobs)[1];
  EXPECT_EQ(rotate.id, "ops-10");
  EXPECT_EQ(rotate.schedule, "@daily");
  EXPECT_EQ(rotate.command, "/usr/bin/rotate");
  EXPECT_EQ(rotate.timezone, "Europe/Berlin");
  EXPECT_EQ(rotate.env.at("GREETING"), "hello world");
  EXPECT_EQ(rotate.env.count("SHELL"), 0u);
  EXPECT_EQ(rotate.env.count("MAILTO"), 0u);
  EXPECT_EQ(rotate.env.count("CRON_TZ"), 0u);

  const JobSpec& backup = (*jobs)[2];
  EXPECT_EQ(backup.schedule, "30 2 * * MON-FRI");
  EXPECT_EQ(backup.command, "backup.sh >/dev/null 2>&1");
  EXPECT_EQ(backup.timezone, "Europe/Berlin");

  const JobSpec& sync = (*jobs)[3];
  EXPECT_EQ(sync.id, "ops-13");
  EXPECT_EQ(sync.schedule, "@every 1h30m");
  EXPECT_EQ(sync.command, "sync");
  EXPECT_EQ(sync.timezone, "UTC");  // CRON_TZ= resets to the default
}

TEST(CrontabTest, DefaultsApplyAndTheCommandReplacesTheirExecutor) {
  JobSpec defaults;
  defaults.timeout = std::chrono::minutes(5);
  defaults.timezone = "Asia/Tokyo";
  defaults.argv = {"/bin/default"};
  defaults.env = {{"A", "default"}, {"B", "default"}};
  Result<std::vector<JobSpec>> jobs = Tab("B=tab\n@hourly run\n", defaults);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  const JobSpec& j = (*jobs)[0];
  EXPECT_EQ(j.timeout, std::chrono::minutes(5));
  EXPECT_EQ(j.timezone, "Asia/Tokyo");
  EXPECT_TRUE(j.argv.empty());
  EXPECT_EQ(j.command, "run");
  EXPECT_EQ(j.env, (std::map<std::string, std::string>{{"A", "default"}, {"B", "tab"}}));
}

TEST(CrontabTest, PercentIsRejectedUnlessEscaped) {
  EXPECT_EQ(ErrorOf(Tab("\n0 0 * * * date +%Y\n")),
            "/etc/cron/ops:2: unescaped % (column 17): gnomon does not support crontab's % "
            "(stdin) feature; write \\% for a literal %");
  Result<std::vector<JobSpec>> jobs = Tab("0 0 * * * date +\\%Y-\\%m \\n\n");
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  EXPECT_EQ((*jobs)[0].command, "date +%Y-%m \\n");
}

TEST(CrontabTest, ErrorsNameFileAndLine) {
  EXPECT_EQ(ErrorOf(Tab("# c\n0 0 * *\n")),
            "/etc/cron/ops:2: expected five time fields and a command");
  EXPECT_EQ(ErrorOf(Tab("0 0 * * *   \n")),
            "/etc/cron/ops:1: expected a command after the schedule");
  EXPECT_EQ(ErrorOf(Tab("@daily\n")), "/etc/cron/ops:1: expected a command after the schedule");
  EXPECT_EQ(ErrorOf(Tab("@every 5m\n")), "/etc/cron/ops:1: expected a command after the schedule");
  EXPECT_EQ(ErrorOf(Tab("@reboot /bin/start\n")),
            "/etc/cron/ops:1: @reboot is not supported: gnomon fires on a schedule, not at boot");
  EXPECT_THAT(ErrorOf(Tab("\n\nCRON_TZ=Mars/Olympus\n")), HasSubstr("/etc/cron/ops:3: CRON_TZ: "));
  const std::string m = ErrorOf(Tab("x=1\n0 25 * * * cmd\n"));
  EXPECT_THAT(m, HasSubstr("/etc/cron/ops:2: job \"ops-2\": schedule: hour: 25 is out of range"));
  EXPECT_THAT(m, HasSubstr("(column"));
  // Columns count in the line, whatever the blanks between the fields.
  EXPECT_EQ(ErrorOf(Tab("0 \t  25 * * * cmd\n")),
            "/etc/cron/ops:1: job \"ops-1\": schedule: hour: 25 is out of range 0-23 (column 6)");
  EXPECT_THAT(ErrorOf(Tab("@fortnightly cmd\n")),
              HasSubstr("/etc/cron/ops:1: job \"ops-1\": schedule: "));
}

TEST(CrontabTest, CrLfAndNoTrailingNewline) {
  Result<std::vector<JobSpec>> jobs = Tab("A=1\r\n5 4 * * * a\r\n@hourly b");
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->size(), 2u);
  EXPECT_EQ((*jobs)[0].command, "a");
  EXPECT_EQ((*jobs)[0].env.at("A"), "1");
  EXPECT_EQ((*jobs)[1].command, "b");
  EXPECT_EQ((*jobs)[1].id, "ops-3");
}

TEST(CrontabTest, IdsAreDeterministicAndSanitised) {
  EXPECT_EQ(CrontabJobId("/var/spool/cron/crontabs/alice", 7), "alice-7");
  EXPECT_EQ(CrontabJobId("my tab (copy).txt", 12), "my_tab__copy_.txt-12");
  EXPECT_EQ(CrontabJobId("dir/", 1), "crontab-1");
  const std::string long_id = CrontabJobId(std::string(300, 'x'), 123456);
  EXPECT_EQ(long_id.size(), 128u);
  EXPECT_TRUE(IsValidJobId(long_id));
  EXPECT_TRUE(long_id.ends_with("-123456"));
  EXPECT_TRUE(IsValidJobId(CrontabJobId("caf\xc3\xa9", 1)));
}

TEST(CrontabTest, LoadCrontabReadsTheFile) {
  const std::string path =
      ::testing::TempDir() + "/gnomon_crontab_test_" + std::to_string(::getpid()) + ".tab";
  {
    std::ofstream out(path);
    out << "0 * * * * echo hi\n";
  }
  Result<std::vector<JobSpec>> jobs = SpecsOf(LoadCrontab(path, JobSpec{}));
  std::filesystem::remove(path);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  EXPECT_EQ((*jobs)[0].source, path + ":1");
  EXPECT_EQ(LoadCrontab("/nonexistent/tab", JobSpec{}).status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace gnomon::server
