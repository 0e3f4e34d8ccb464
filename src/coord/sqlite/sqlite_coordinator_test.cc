#include "gnomon/sqlite_coordinator.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "src/coord/coordinator_conformance.h"
#include "src/coord/coordinator_util.h"
#include "src/coord/sqlite/sqlite_connection.h"

namespace gnomon::testing {
namespace {

using std::chrono::hours;
using std::chrono::milliseconds;
using std::chrono::seconds;
using R = ClaimOutcome::Result;

// A fresh directory for this test binary's databases, removed at exit.
class TempDirEnvironment : public ::testing::Environment {
 public:
  static const std::string& Dir() {
    static const std::string dir = [] {
      std::string pattern = std::filesystem::temp_directory_path() / "gnomon-sqlite-XXXXXX";
      char* made = mkdtemp(pattern.data());
      GNOMON_CHECK(made != nullptr);
      return pattern;
    }();
    return dir;
  }
  void TearDown() override { std::filesystem::remove_all(Dir()); }
};
const auto* const kTempDirEnv = ::testing::AddGlobalTestEnvironment(new TempDirEnvironment);

std::string NewDbPath() {
  static std::atomic<int> n{0};
  return TempDirEnvironment::Dir() + "/db-" + std::to_string(n.fetch_add(1)) + ".sqlite";
}

CoordinatorFactory SqliteFactory() {
  return {"Sqlite", [](FakeClock* clock) -> std::unique_ptr<Coordinator> {
            Result<std::unique_ptr<SqliteCoordinator>> c =
                SqliteCoordinator::Open(NewDbPath(), *clock);
            EXPECT_TRUE(c.ok()) << c.status().ToString();
            if (!c.ok()) return nullptr;
            return std::move(*c);
          }};
}

GNOMON_INSTANTIATE_COORDINATOR_CONFORMANCE(Backend, SqliteFactory());

std::unique_ptr<SqliteCoordinator> MustOpen(const std::string& path, Clock& clock,
                                            SqliteOptions options = {}) {
  Result<std::unique_ptr<SqliteCoordinator>> c = SqliteCoordinator::Open(path, clock, options);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? std::move(*c) : nullptr;
}

FireKey Fire(const std::string& job, Instant at) {
  FireKey f;
  f.job_id = job;
  f.scheduled_at = at;
  return f;
}

ClaimRequest Req(const FireKey& fire, const std::string& node) {
  ClaimRequest r;
  r.fire = fire;
  r.node_id = node;
  r.overlap = OverlapPolicy::kAllow;
  return r;
}

// A raw connection for poking at the file from outside the coordinator.
class RawDb {
 public:
  explicit RawDb(const std::string& path) {
    EXPECT_EQ(sqlite3_open(path.c_str(), &db_), SQLITE_OK);
  }
  ~RawDb() { sqlite3_close(db_); }
  int Exec(const char* sql) { return sqlite3_exec(db_, sql, nullptr, nullptr, nullptr); }
  std::string QueryText(const char* sql) {
    sqlite3_stmt* stmt = nullptr;
    std::string out;
    if (sqlite3_prepare_v2(db_, sql, -1, &stmt, nullptr) == SQLITE_OK &&
        sqlite3_step(stmt) == SQLITE_ROW) {
      out = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
    }
    sqlite3_finalize(stmt);
    return out;
  }

 private:
  sqlite3* db_ = nullptr;
};

TEST(SqliteCoordinatorTest, ReopeningKeepsHistoryAndTokensContinueUpward) {
  const std::string path = NewDbPath();
  FakeClock clock;
  const Instant t0 = clock.Now();
  int64_t last_token = 0;
  std::vector<RunRecord> before;
  {
    auto c = MustOpen(path, clock);
    ASSERT_NE(c, nullptr);
    for (int i = 0; i < 5; ++i) {
      Result<ClaimOutcome> out = c->Claim(Req(Fire("j", t0 - seconds(10 - i)), "n"));
      ASSERT_TRUE(out.ok());
      ASSERT_EQ(out->result, R::kClaimed);
      const Claim& claim = *out->claim;
      EXPECT_GT(claim.fencing_token, last_token);
      last_token = claim.fencing_token;
      if (i < 4) {
        RunRecord r;
        r.run_id = claim.fire.RunId();
        r.job_id = "j";
        r.scheduled_at = claim.fire.scheduled_at;
        r.attempt = 1;
        r.fencing_token = claim.fencing_token;
        r.node_id = "n";
        r.started_at = t0;
        r.finished_at = t0 + seconds(1);
        r.outcome = RunOutcome::kSucceeded;
        r.output = "run " + std::to_string(i);
        ASSERT_TRUE(c->Report(claim, r, true).ok());
      } else {
        ASSERT_TRUE(c->SaveCheckpoint(claim, "cp").ok());
      }
    }
    ASSERT_TRUE(c->PutJob("j", "{}", 0).ok());
    before = c->ListRuns(RunQuery{.limit = 100})->runs;
  }
  auto c = MustOpen(path, clock);
  ASSERT_NE(c, nullptr);
  std::vector<RunRecord> after = c->ListRuns(RunQuery{.limit = 100})->runs;
  ASSERT_EQ(after.size(), before.size());
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].run_id, before[i].run_id);
    EXPECT_EQ(after[i].outcome, before[i].outcome);
    EXPECT_EQ(after[i].output, before[i].output);
    EXPECT_EQ(after[i].fencing_token, before[i].fencing_token);
  }
  EXPECT_EQ(c->LoadCheckpoint(Fire("j", t0 - seconds(6)))->value_or(""), "cp");
  EXPECT_EQ(c->ListJobs()->size(), 1u);
  EXPECT_EQ(c->Claim(Req(Fire("j", t0 - seconds(10)), "n"))->result, R::kAlreadyClaimed);
  Result<ClaimOutcome> next = c->Claim(Req(Fire("j", t0), "n"));
  ASSERT_TRUE(next.ok());
  ASSERT_EQ(next->result, R::kClaimed);
  EXPECT_GT(next->claim->fencing_token, last_token);
}

TEST(SqliteCoordinatorTest, TokensNeverGoBelowTheHistoryEvenIfTheCounterIsLost) {
  const std::string path = NewDbPath();
  FakeClock clock;
  int64_t token = 0;
  {
    auto c = MustOpen(path, clock);
    ASSERT_NE(c, nullptr);
    for (int i = 0; i < 3; ++i) {
      Result<ClaimOutcome> out = c->Claim(Req(Fire("j", clock.Now() - seconds(i)), "n"));
      ASSERT_TRUE(out.ok() && out->claim);
      token = std::max(token, out->claim->fencing_token);
    }
  }
  {
    RawDb raw(path);
    ASSERT_EQ(raw.Exec("DELETE FROM fences"), SQLITE_OK);
  }
  auto c = MustOpen(path, clock);
  Result<ClaimOutcome> out = c->Claim(Req(Fire("j", clock.Now() - seconds(10)), "n"));
  ASSERT_TRUE(out.ok() && out->claim);
  EXPECT_GT(out->claim->fencing_token, token);
}

// A new database (and its WAL files) is readable by its owner only, whatever the umask.
TEST(SqliteCoordinatorTest, ANewDatabaseIsCreatedOwnerOnly) {
  const std::string path = NewDbPath();
  FakeClock clock;
  const mode_t old_umask = ::umask(0);
  auto c = MustOpen(path, clock);
  ::umask(old_umask);
  ASSERT_NE(c, nullptr);
  ASSERT_TRUE(c->PutJob("j", "{}", 0).ok());  // writes the WAL
  for (const std::string& file : {path, path + "-wal", path + "-shm"}) {
    struct stat st {};
    ASSERT_EQ(::stat(file.c_str(), &st), 0) << file;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << file;
  }
}

// What schema version 5 added, undone.
#define kDropV5 "ALTER TABLE job_state DROP COLUMN markers_pruned_ms; "

// Makes the file at `path` an older version with `downgrade` (SQL on the raw file), opens it
// again and checks that it was upgraded to this build's version; null (and a failure) if not.
std::unique_ptr<SqliteCoordinator> ReopenedAfter(const std::string& path, FakeClock& clock,
                                                 const char* downgrade) {
  EXPECT_EQ(RawDb(path).Exec(downgrade), SQLITE_OK) << downgrade;
  std::unique_ptr<SqliteCoordinator> c = MustOpen(path, clock);
  EXPECT_EQ(RawDb(path).QueryText("PRAGMA user_version"),
            std::to_string(SqliteCoordinator::kSchemaVersion));
  return c;
}

// Opens a new file at `path` and claims `fire` in it (reported succeeded when `close`), the data
// an older release leaves; the file is closed again on return.
void ClaimInANewFile(const std::string& path, FakeClock& clock, const FireKey& fire, bool close) {
  auto c = MustOpen(path, clock);
  ASSERT_NE(c, nullptr);
  Result<ClaimOutcome> out = c->Claim(ClaimRequest{.fire = fire, .node_id = "n"});
  ASSERT_TRUE(out.ok() && out->claim);
  if (!close) return;
  ASSERT_TRUE(c->Report(*out->claim,
                        coord::NewRecord(fire, 1, out->claim->fencing_token, "n", clock.Now(),
                                         RunOutcome::kSucceeded),
                        true)
                  .ok());
}

TEST(SqliteCoordinatorTest, OpenSetsWalAndTheSchemaVersion) {
  const std::string path = NewDbPath();
  FakeClock clock;
  ASSERT_NE(MustOpen(path, clock), nullptr);
  RawDb raw(path);
  EXPECT_EQ(raw.QueryText("PRAGMA journal_mode"), "wal");
  EXPECT_EQ(raw.QueryText("PRAGMA user_version"),
            std::to_string(SqliteCoordinator::kSchemaVersion));
  // Opening again is a no-op on the schema.
  ASSERT_NE(MustOpen(path, clock), nullptr);
}

// A version-1 file (before the audit log) is upgraded in place, keeping its data.
TEST(SqliteCoordinatorTest, OpenUpgradesAVersion1File) {
  const std::string path = NewDbPath();
  FakeClock clock;
  {
    auto c = MustOpen(path, clock);
    ASSERT_NE(c, nullptr);
    ASSERT_TRUE(c->PutJob("kept", "{}", 0).ok());
  }
  auto c = ReopenedAfter(path, clock,
                         "DROP TABLE audit; ALTER TABLE runs DROP COLUMN params; "
                         "ALTER TABLE runs DROP COLUMN cause; " kDropV5 "PRAGMA user_version = 1");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->ListJobs()->size(), 1u);
  AuditRecord r;
  r.who = "ops";
  ASSERT_TRUE(c->AppendAudit(r, 10).ok());
  EXPECT_EQ(c->ListAudit(10, 0)->size(), 1u);
}

// A version-2 file (audit log without the class index) is upgraded in place, keeping its records.
TEST(SqliteCoordinatorTest, OpenUpgradesAVersion2File) {
  const std::string path = NewDbPath();
  FakeClock clock;
  {
    auto c = MustOpen(path, clock);
    ASSERT_NE(c, nullptr);
    AuditRecord r;
    r.who = "ops";
    r.result = AuditResult::kOk;
    ASSERT_TRUE(c->AppendAudit(r, 10).ok());
  }
  auto c = ReopenedAfter(path, clock,
                         "DROP INDEX audit_by_class; ALTER TABLE runs DROP COLUMN params; ALTER "
                         "TABLE runs DROP COLUMN cause; " kDropV5 "PRAGMA user_version = 2");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->ListAudit(10, 0)->size(), 1u);
}

// Audit records written by the releases that stored an HTTP status list with its result, and a
// record written now keeps the number an older release reads the same way.
TEST(SqliteCoordinatorTest, AuditRecordsOfEarlierReleasesListWithTheirResults) {
  const std::string path = NewDbPath();
  FakeClock clock;
  ASSERT_NE(MustOpen(path, clock), nullptr);
  ASSERT_EQ(RawDb(path).Exec(
                "INSERT INTO audit (at_ms, who, action, target, status, before_json, after_json) "
                "VALUES (1, 'ops', 'create', 'a', 201, '', '{}'), (2, 'ops', 'delete', 'a', 204, "
                "'{}', ''), (3, 'ci', 'pause', 'b', 401, '', ''), (4, 'ci', 'replace', 'b', 412, "
                "'', ''), (5, 'ci', 'create', 'c', 413, '', ''), (6, 'ci', 'trigger', 'c', 502, "
                "'', ''), (7, 'ci', 'trigger', 'c', 504, '', '')"),
            SQLITE_OK);
  auto c = MustOpen(path, clock);
  ASSERT_NE(c, nullptr);
  Result<std::vector<AuditRecord>> all = c->ListAudit(10, 0);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  std::vector<AuditResult> results;
  for (const AuditRecord& r : *all) results.push_back(r.result);
  EXPECT_EQ(results,
            (std::vector<AuditResult>{AuditResult::kUnavailable, AuditResult::kFailed,
                                      AuditResult::kInvalid, AuditResult::kConflict,
                                      AuditResult::kDenied, AuditResult::kOk, AuditResult::kOk}));
  EXPECT_EQ(all->back().after, "{}");
  AuditRecord denied;
  denied.who = "ci";
  denied.result = AuditResult::kDenied;
  ASSERT_TRUE(c->AppendAudit(denied, 10).ok());
  EXPECT_EQ(RawDb(path).QueryText("SELECT status FROM audit ORDER BY seq DESC LIMIT 1"), "403");
}

// A version-3 file (runs without parameters) is upgraded in place: its records read back with
// no parameters, and new records keep theirs.
TEST(SqliteCoordinatorTest, OpenUpgradesAVersion3File) {
  const std::string path = NewDbPath();
  FakeClock clock;
  const FireKey old_fire{"upgraded", clock.Now() - std::chrono::seconds(5)};
  ASSERT_NO_FATAL_FAILURE(ClaimInANewFile(path, clock, old_fire, false));
  auto c = ReopenedAfter(
      path, clock,
      "ALTER TABLE runs DROP COLUMN params; ALTER TABLE runs DROP COLUMN cause; " kDropV5
      "PRAGMA user_version = 3");
  ASSERT_NE(c, nullptr);
  Result<std::vector<RunRecord>> old_runs = c->GetRun(old_fire.RunId());
  ASSERT_TRUE(old_runs.ok());
  ASSERT_EQ(old_runs->size(), 1u);
  EXPECT_EQ((*old_runs)[0].params, "");

  const FireKey new_fire{"upgraded", clock.Now()};
  // (The old fire's lease is live: overlap = allow.)
  Result<ClaimOutcome> out =
      c->Claim(ClaimRequest{.fire = new_fire, .node_id = "n", .overlap = OverlapPolicy::kAllow});
  ASSERT_TRUE(out.ok() && out->claim);
  RunRecord r = coord::NewRecord(new_fire, 1, out->claim->fencing_token, "n", clock.Now(),
                                 RunOutcome::kSucceeded);
  r.params = R"({"month":"2026-11"})";
  ASSERT_TRUE(c->Report(*out->claim, r, true).ok());
  Result<std::vector<RunRecord>> new_runs = c->GetRun(new_fire.RunId());
  ASSERT_TRUE(new_runs.ok());
  ASSERT_EQ(new_runs->size(), 1u);
  EXPECT_EQ((*new_runs)[0].params, r.params);
}

// A version-4 file (no prune cutoff) is upgraded in place: its fires keep refusing a second
// claim, and once pruned, a fire behind the cutoff is too old to claim by schedule.
TEST(SqliteCoordinatorTest, OpenUpgradesAVersion4File) {
  const std::string path = NewDbPath();
  FakeClock clock;
  const FireKey old_fire{"upgraded", clock.Now() - std::chrono::hours(30)};
  ASSERT_NO_FATAL_FAILURE(ClaimInANewFile(path, clock, old_fire, true));
  auto c = ReopenedAfter(path, clock, kDropV5 "PRAGMA user_version = 4");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->Claim(ClaimRequest{.fire = old_fire, .node_id = "m"})->result,
            ClaimOutcome::Result::kAlreadyClaimed);
  ASSERT_TRUE(c->PruneHistory("upgraded", 1, std::chrono::hours(24)).ok());
  EXPECT_EQ(RawDb(path).QueryText("SELECT count(*) FROM fires"), "0");
  EXPECT_EQ(RawDb(path).QueryText("SELECT markers_pruned_ms FROM job_state"),
            std::to_string((clock.Now() - std::chrono::hours(24)).unix_millis()));
  EXPECT_EQ(c->Claim(ClaimRequest{.fire = old_fire, .node_id = "m"})->result,
            ClaimOutcome::Result::kTooOld);
}

TEST(SqliteCoordinatorTest, OpenRefusesANewerSchema) {
  const std::string path = NewDbPath();
  FakeClock clock;
  ASSERT_NE(MustOpen(path, clock), nullptr);
  {
    RawDb raw(path);
    ASSERT_EQ(raw.Exec("PRAGMA user_version = 99"), SQLITE_OK);
  }
  Result<std::unique_ptr<SqliteCoordinator>> c = SqliteCoordinator::Open(path, clock);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kFailedPrecondition) << c.status().ToString();
  EXPECT_NE(c.status().message().find("99"), std::string::npos);
}

TEST(SqliteCoordinatorTest, OpenErrors) {
  FakeClock clock;
  EXPECT_EQ(SqliteCoordinator::Open("", clock).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SqliteCoordinator::Open(NewDbPath(), clock, {.busy_timeout = milliseconds(-1)})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  Result<std::unique_ptr<SqliteCoordinator>> missing_dir =
      SqliteCoordinator::Open(TempDirEnvironment::Dir() + "/no/such/dir/db", clock);
  EXPECT_EQ(missing_dir.status().code(), StatusCode::kUnavailable)
      << missing_dir.status().ToString();
  const std::string garbage = NewDbPath();
  std::ofstream(garbage) << std::string(4096, 'x');
  Result<std::unique_ptr<SqliteCoordinator>> not_db = SqliteCoordinator::Open(garbage, clock);
  EXPECT_EQ(not_db.status().code(), StatusCode::kInternal) << not_db.status().ToString();
}

TEST(SqliteCoordinatorTest, ALockHeldPastTheBusyTimeoutIsUnavailableAndWritesNothing) {
  const std::string path = NewDbPath();
  FakeClock clock;
  auto c = MustOpen(path, clock, {.busy_timeout = Duration(0)});
  ASSERT_NE(c, nullptr);
  const FireKey fire = Fire("j", clock.Now());
  RawDb raw(path);
  ASSERT_EQ(raw.Exec("BEGIN IMMEDIATE"), SQLITE_OK);
  Result<ClaimOutcome> out = c->Claim(Req(fire, "n"));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kUnavailable) << out.status().ToString();
  EXPECT_EQ(c->PutJob("j", "{}", 0).status().code(), StatusCode::kUnavailable);
  // Reads are not blocked by a writer (WAL).
  EXPECT_EQ(c->GetRun(fire.RunId()).status().code(), StatusCode::kNotFound);
  ASSERT_EQ(raw.Exec("COMMIT"), SQLITE_OK);
  out = c->Claim(Req(fire, "n"));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->result, R::kClaimed);
}

TEST(SqliteCoordinatorTest, ErrorMapping) {
  using sqlite::StatusFromSqlite;
  Status full = StatusFromSqlite(SQLITE_FULL, "/d/g.db", "commit", "database or disk is full");
  EXPECT_EQ(full.code(), StatusCode::kUnavailable);
  EXPECT_NE(full.message().find("disk is full"), std::string::npos) << full.message();
  EXPECT_NE(full.message().find("/d/g.db"), std::string::npos);
  EXPECT_EQ(StatusFromSqlite(SQLITE_IOERR_FSYNC, "p", "commit", "").code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(StatusFromSqlite(SQLITE_BUSY, "p", "begin", "").code(), StatusCode::kUnavailable);
  EXPECT_EQ(StatusFromSqlite(SQLITE_LOCKED_SHAREDCACHE, "p", "x", "").code(),
            StatusCode::kUnavailable);
  EXPECT_EQ(StatusFromSqlite(SQLITE_CORRUPT, "p", "x", "").code(), StatusCode::kInternal);
  EXPECT_EQ(StatusFromSqlite(SQLITE_CONSTRAINT_PRIMARYKEY, "p", "x", "").code(),
            StatusCode::kInternal);
}

TEST(SqliteCoordinatorTest, ValuesAreBoundNotInterpolated) {
  FakeClock clock;
  auto c = MustOpen(NewDbPath(), clock);
  ASSERT_NE(c, nullptr);
  const std::string hostile = "n'); DROP TABLE runs; --\"\\";
  ASSERT_TRUE(c->RecordSkipped(Fire("j", clock.Now()), hostile, hostile).ok());
  ASSERT_TRUE(c->PutJob("j", hostile, 0).ok());
  Result<std::vector<RunRecord>> runs = c->GetRun(Fire("j", clock.Now()).RunId());
  ASSERT_TRUE(runs.ok()) << runs.status().ToString();
  EXPECT_EQ((*runs)[0].node_id, hostile);
  EXPECT_EQ((*runs)[0].skip_reason, hostile);
  EXPECT_EQ((*c->ListJobs())[0].definition, hostile);
}

// Two connections to one file in one process, each used from several threads.
TEST(SqliteCoordinatorTest, TwoConnectionsOnOneFileClaimEachFireOnce) {
  const std::string path = NewDbPath();
  FakeClock clock;
  auto a = MustOpen(path, clock);
  auto b = MustOpen(path, clock);
  ASSERT_TRUE(a && b);
  constexpr int kFires = 100;
  constexpr int kThreadsPerConn = 3;
  const Instant base = clock.Now() - hours(1);
  std::atomic<int> claimed{0};
  std::atomic<int> errors{0};
  std::vector<std::vector<int64_t>> tokens(2 * kThreadsPerConn);
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < 2 * kThreadsPerConn; ++t) {
      threads.emplace_back([&, t] {
        SqliteCoordinator& c = t % 2 ? *a : *b;
        for (int i = 0; i < kFires; ++i) {
          Result<ClaimOutcome> out = c.Claim(Req(Fire("race", base + seconds(i)), "n"));
          if (!out.ok()) {
            errors.fetch_add(1);
          } else if (out->result == R::kClaimed) {
            claimed.fetch_add(1);
            tokens[t].push_back(out->claim->fencing_token);
          }
        }
      });
    }
  }
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(claimed.load(), kFires);
  std::set<int64_t> distinct;
  for (const auto& v : tokens) distinct.insert(v.begin(), v.end());
  EXPECT_EQ(distinct.size(), static_cast<size_t>(kFires));
}

// Reads run on the read connections, beside the write connection: with more threads than read
// connections, each thread's reads see its own writes as soon as the write call returns, and
// nothing fails or races (run under TSan too).
TEST(SqliteCoordinatorTest, ReadsFromManyThreadsSeeTheirOwnCommittedWrites) {
  FakeClock clock;
  auto c = MustOpen(NewDbPath(), clock, {.read_connections = 2});
  ASSERT_NE(c, nullptr);
  constexpr int kThreads = 6;
  constexpr int kFires = 30;
  const Instant base = clock.Now() - hours(1);
  std::atomic<int> failures{0};
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&, t] {
        const std::string job = "job-" + std::to_string(t);
        auto check = [&](bool ok) {
          if (!ok) failures.fetch_add(1);
        };
        Result<int64_t> version = c->PutJob(job, "{}", 0);
        check(version.ok());
        Result<int64_t> seen = c->JobsVersion();
        check(seen.ok() && version.ok() && *seen >= *version);
        Result<std::vector<StoredJob>> jobs = c->ListJobs();
        check(jobs.ok() && std::any_of(jobs->begin(), jobs->end(),
                                       [&](const StoredJob& j) { return j.job_id == job; }));
        for (int i = 0; i < kFires; ++i) {
          Result<ClaimOutcome> out = c->Claim(Req(Fire(job, base + seconds(i)), "n"));
          check(out.ok() && out->claim.has_value());
          if (!out.ok() || !out->claim) continue;
          RunRecord r = coord::NewRecord(out->claim->fire, 1, out->claim->fencing_token, "n",
                                         clock.Now(), RunOutcome::kSucceeded);
          r.finished_at = clock.Now();
          check(c->Report(*out->claim, r, true).ok());
          Result<std::vector<RunRecord>> run = c->GetRun(out->claim->fire.RunId());
          check(run.ok() && run->size() == 1 && (*run)[0].outcome == RunOutcome::kSucceeded);
          Result<RunPage> page = c->ListRuns(RunQuery{.job_id = job, .limit = 1});
          check(page.ok() && page->runs.size() == 1 &&
                page->runs[0].run_id == out->claim->fire.RunId());
          Result<JobState> state = c->GetJobState(job);
          check(state.ok() && state->last_scheduled == out->claim->fire.scheduled_at);
        }
      });
    }
  }
  EXPECT_EQ(failures.load(), 0);
  Result<RunPage> all = c->ListRuns(RunQuery{.limit = 1000});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(all->runs.size(), static_cast<size_t>(kThreads * kFires));
}

TEST(SqliteCoordinatorTest, ReadConnectionsMustBeAtLeastOne) {
  FakeClock clock;
  EXPECT_EQ(SqliteCoordinator::Open(NewDbPath(), clock, {.read_connections = 0}).status().code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gnomon::testing
