// Black-box tests of the gnomon binary's cron commands (exit codes, stdout, stderr).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

struct CliRun {
  int exit_code;
  std::string out;
  std::string err;
};

CliRun Gnomon(const std::string& args) {
  const char* bin = std::getenv("GNOMON_BIN");
  if (bin == nullptr) bin = GNOMON_BIN_PATH;
  const std::string err_file = ::testing::TempDir() + "/gnomon_cli_err.txt";
  const std::string cmd = std::string(bin) + " " + args + " 2>" + err_file;
  CliRun r{};
  FILE* p = popen(cmd.c_str(), "r");
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  FILE* e = fopen(err_file.c_str(), "r");
  while (e && (n = fread(buf.data(), 1, buf.size(), e)) > 0) r.err.append(buf.data(), n);
  if (e) fclose(e);
  return r;
}

TEST(CliTest, CronNextPrintsUtcInstantsOneALine) {
  CliRun r = Gnomon(
      "cron next '0 30 2 * * *' --tz America/New_York --from 2025-03-09T01:59:00-05:00 -n 3");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "2025-03-09T07:00:00Z\n2025-03-10T06:30:00Z\n2025-03-11T06:30:00Z\n");
}

TEST(CliTest, CronNextJson) {
  CliRun r = Gnomon("cron next '@every 90s' --from 2024-12-31T23:59:30Z -n 2 --json");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("\"2025-01-01T00:00:00Z\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"2025-01-01T00:01:30Z\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"description\""), std::string::npos) << r.out;
}

TEST(CliTest, InvalidExpressionExits2WithTheMessageOnStderr) {
  CliRun r = Gnomon("cron next '0 0 25 * * *'");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("hour: 25 is out of range 0-23 (column 5)"), std::string::npos) << r.err;
}

TEST(CliTest, CheckpointSetPrintsTheMarkerInsideARunOnly) {
  unsetenv("GNOMON_RUN_ID");
  CliRun outside = Gnomon("checkpoint set step-3");
  EXPECT_EQ(outside.exit_code, 2);
  EXPECT_EQ(outside.out, "");
  EXPECT_NE(outside.err.find("not inside a gnomon run"), std::string::npos) << outside.err;
  setenv("GNOMON_RUN_ID", "batch@1796000000000", 1);  // as the process executor sets it
  CliRun inside = Gnomon("checkpoint set 'step 3'");
  CliRun two_lines = Gnomon("checkpoint set \"$(printf 'a\\nb')\"");
  unsetenv("GNOMON_RUN_ID");
  EXPECT_EQ(inside.exit_code, 0) << inside.err;
  EXPECT_EQ(inside.out, "::gnomon-checkpoint step 3\n");
  EXPECT_EQ(two_lines.exit_code, 2);
  EXPECT_NE(two_lines.err.find("one line"), std::string::npos) << two_lines.err;
}

TEST(CliTest, InvalidZoneExits2) {
  CliRun r = Gnomon("cron next '* * * * *' --tz Mars/Olympus");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("Mars/Olympus"), std::string::npos) << r.err;
  CliRun e = Gnomon("cron explain '* * * * *' --tz ../../etc/passwd");
  EXPECT_EQ(e.exit_code, 2);
}

TEST(CliTest, ExplainDescribesAndListsFires) {
  CliRun r =
      Gnomon("cron explain '0 0 2 1 * *' --tz Asia/Shanghai --from 2026-01-15T00:00:00Z -n 2");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("At 02:00, on day 1 of the month (Asia/Shanghai time)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("2026-01-31T18:00:00Z  (2026-02-01T02:00:00+08:00)"), std::string::npos)
      << r.out;
  CliRun never = Gnomon("cron explain '0 0 30 2 *'");
  EXPECT_EQ(never.exit_code, 0);
  EXPECT_NE(never.out.find("never fires"), std::string::npos) << never.out;
}

TEST(CliTest, HelpOnEveryCommandAndUsageErrors) {
  for (const char* cmd : {"--help", "cron --help", "cron next --help", "cron explain --help"}) {
    CliRun r = Gnomon(cmd);
    EXPECT_EQ(r.exit_code, 0) << cmd;
    EXPECT_NE(r.out.find("Usage"), std::string::npos) << cmd << ": " << r.out;
  }
  EXPECT_EQ(Gnomon("cron next").exit_code, 2);
  EXPECT_EQ(Gnomon("cron next '* * * * *' -n 0").exit_code, 2);
  EXPECT_EQ(Gnomon("nonsense").exit_code, 2);
}

// The migration takes Redis URLs only, and says why a backend cannot be moved.
TEST(CliTest, MigrateRedisGroupsNamesWhatIsWrong) {
  CliRun sqlite = Gnomon("migrate redis-groups --backend sqlite:///tmp/gnomon-cli.db");
  EXPECT_EQ(sqlite.exit_code, 2);
  EXPECT_NE(sqlite.err.find("needs a Redis backend"), std::string::npos) << sqlite.err;
  CliRun down = Gnomon("migrate redis-groups --backend redis://127.0.0.1:1/0");
  EXPECT_EQ(down.exit_code, 1);
  EXPECT_NE(down.err.find("redis 127.0.0.1:1"), std::string::npos) << down.err;
  EXPECT_EQ(Gnomon("migrate").exit_code, 2);
  EXPECT_EQ(Gnomon("migrate redis-groups --help").exit_code, 0);
}

}  // namespace
