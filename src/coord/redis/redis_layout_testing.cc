#include "src/coord/redis/redis_layout_testing.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>

#include "src/coord/conformance_helpers.h"
#include "src/coord/redis/redis_codec.h"
#include "src/coord/redis/redis_store.h"

namespace gnomon::testing {
namespace {

using conformance::Fire;
using conformance::Req;
using std::chrono::seconds;
using R = ClaimOutcome::Result;

// Key names of the layout (gnomon/redis_coordinator.h), from the coordinator's own functions.
std::string JobBase(const RedisOptions& o, const std::string& job) {
  return coord::redis::GroupBase(o.prefix + ":" + o.ns, coord::redis::KeyGroup(job)) +
         ":job:" + job;
}
std::string SharedBase(const RedisOptions& o) { return o.prefix + ":" + o.ns + ":{~shared}"; }

// A keyspace as the releases of the key-group layout wrote it: per job J:state, J:fire:<fid> (a
// hash, with a TTL once closed), J:run:<fid>:<n>, J:runs and J:live; the shared keys under
// {~shared}; the marker "groups". 20 jobs fired at `at`, job-7's fire still open (holder "old"),
// job-4 paused, job-5 with an older fire whose record was trimmed (its marker alone), job-3
// defined through the API, and node "old-node" whose heartbeat lasts (far in the future).
void WriteKeyGroupLayout(const KeyCommandText& command, const RedisOptions& o, Instant at,
                         int64_t token) {
  auto run = [&](const std::vector<std::string>& argv) {
    EXPECT_NE(command(argv[1], argv), "") << argv[0] << " " << argv[1];
  };
  const std::string shared = SharedBase(o);
  const std::string ms = std::to_string(at.unix_millis());
  const std::string fid = ms + ":0";
  const std::string lease = std::to_string(at.unix_millis() + 30000);
  run({"SET", shared + ":layout", "groups"});
  for (int i = 0; i < 20; ++i) {
    const std::string job = "job-" + std::to_string(i);
    const std::string jb = JobBase(o, job);
    const std::string tok = std::to_string(token + i);
    const bool open = i == 7;
    run({"HSET", jb + ":state", "token", tok, "last", ms});
    run({"HSET", jb + ":fire:" + fid, "att", "1", "tok", tok, "node", "old", "lease",
         open ? lease : ms, "open", open ? "1" : "0", "sc", "1"});
    if (!open) run({"PEXPIRE", jb + ":fire:" + fid, "604800000"});
    run({"HSET", jb + ":run:" + fid + ":1", "sc", "1", "tok", tok, "node", "old", "st", ms, "fin",
         open ? "0" : ms, "out", open ? "running" : "succeeded"});
    if (open) {
      run({"HSET", jb + ":run:" + fid + ":1", "cause", "backfill by ops"});
      run({"ZADD", jb + ":live", lease, fid});
      // The lease index: the shared one on one primary, the job's group's under a Cluster.
      const std::string leases =
          o.cluster_seeds.empty()
              ? shared + ":leases"
              : coord::redis::GroupBase(o.prefix + ":" + o.ns, coord::redis::KeyGroup(job)) +
                    ":leases";
      run({"ZADD", leases, lease, job + " " + fid});
    } else {
      run({"HSET", jb + ":run:" + fid + ":1", "exit", "0", "output", "hello " + job});
    }
    const std::string member =
        coord::redis::Member(coord::RunPosition{at.unix_millis(), job, 0, 1});
    run({"ZADD", jb + ":runs", "0", member});
    run({"ZADD", shared + ":runs", "0", member});
  }
  run({"HSET", JobBase(o, "job-4") + ":state", "paused", "1", "reason", "ops"});
  const std::string older = std::to_string(at.unix_millis() - 60000) + ":0";
  run({"HSET", JobBase(o, "job-5") + ":fire:" + older, "att", "1", "tok", "5", "node", "old",
       "lease", ms, "open", "0", "sc", "1"});
  run({"PEXPIRE", JobBase(o, "job-5") + ":fire:" + older, "604800000"});
  run({"HSET", shared + ":jobs", "job-3", "1\n{\"schedule\":\"@daily\"}"});
  run({"HSET", shared + ":meta", "jobs_version", "1"});
  run({"HSET", shared + ":nodes", "old-node", ms + "\n"});
  run({"ZADD", shared + ":nodes:exp", "99999999999999", "old-node"});
}

}  // namespace

void CheckKeyGroupMigration(const KeyCommandText& command, const KeysMatching& keys, RedisOptions o,
                            FakeClock& clock) {
  o.clock_override = &clock;
  const Instant t0 = clock.Now() - seconds(30);
  const int64_t token = t0.unix_millis() * 1000;
  WriteKeyGroupLayout(command, o, t0, token);
  const std::string b = o.prefix + ":" + o.ns;

  Result<std::unique_ptr<RedisCoordinator>> refused = RedisCoordinator::Open(o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("gnomon migrate redis-groups"), std::string::npos)
      << refused.status().message();
  Result<KeyGroupMigration> busy = RedisCoordinator::MigrateKeyGroups(o);
  ASSERT_FALSE(busy.ok());
  EXPECT_EQ(busy.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(busy.status().message().find("old-node"), std::string::npos) << busy.status().message();
  const std::string expiries = SharedBase(o) + ":nodes:exp";
  command(expiries, {"ZADD", expiries, "1", "old-node"});

  Result<KeyGroupMigration> moved = RedisCoordinator::MigrateKeyGroups(o);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_FALSE(moved->already_done);
  EXPECT_EQ(moved->job_keys, 0);
  EXPECT_GE(moved->ledger_keys, 20 + 20 + 1 + 20);  // states, markers, records
  for (const char* left : {":*:state", ":*:live", ":*:fire:*", ":*:run:*"}) {
    EXPECT_TRUE(keys(b + left).empty()) << left;
  }
  const std::string marker = SharedBase(o) + ":layout";
  EXPECT_EQ(command(marker, {"GET", marker}), "ledger");
  Result<KeyGroupMigration> again = RedisCoordinator::MigrateKeyGroups(o);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(again->already_done);

  Result<std::unique_ptr<RedisCoordinator>> opened = RedisCoordinator::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  RedisCoordinator& c = **opened;
  const std::string job1 = JobBase(o, "job-1");
  EXPECT_EQ(command(job1, {"PTTL", job1}), "-1") << "markers have no TTL now";
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(c.Claim(Req(Fire("job-" + std::to_string(i), t0), "new"))->result, R::kAlreadyClaimed)
        << i;
  }
  EXPECT_EQ(c.Claim(Req(Fire("job-5", t0 - seconds(60)), "new"))->result, R::kAlreadyClaimed);
  Result<ClaimOutcome> next = c.Claim(Req(Fire("job-2", t0 + seconds(1)), "new"));
  ASSERT_TRUE(next.ok() && next->claim) << next.status().ToString();
  EXPECT_GT(next->claim->fencing_token, token + 2);  // job-2's tokens keep increasing
  EXPECT_EQ(c.Claim(Req(Fire("job-4", t0 + seconds(1)), "new"))->result, R::kPaused);
  Result<RunPage> all = c.ListRuns(RunQuery{.limit = 100});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->runs.size(), 22u);  // 20 fires, the new claim, job-4's skipped fire
  Result<RunPage> one = c.ListRuns(RunQuery{.job_id = "job-5"});
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->runs.size(), 1u) << "the marker alone lists no record";
  EXPECT_EQ(one->runs[0].outcome, RunOutcome::kSucceeded);
  EXPECT_EQ(one->runs[0].output, "hello job-5");
  EXPECT_EQ(one->runs[0].exit_code, std::optional<int>(0));
  Result<std::vector<RunRecord>> open = c.GetRun(Fire("job-7", t0).RunId());
  ASSERT_TRUE(open.ok() && open->size() == 1u) << open.status().ToString();
  EXPECT_EQ((*open)[0].outcome, RunOutcome::kRunning);
  EXPECT_EQ((*open)[0].node_id, "old");
  EXPECT_EQ((*open)[0].cause, "backfill by ops");
  EXPECT_EQ((*open)[0].fencing_token, token + 7);
  Result<StoredJob> job = c.GetJob("job-3");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->definition, R"({"schedule":"@daily"})");
  clock.Advance(seconds(60));
  Result<std::vector<ExpiredFire>> lost = c.ListExpired(10);
  ASSERT_TRUE(lost.ok()) << lost.status().ToString();
  // The fire left open before the move and the claim made after it (their leases end at once).
  std::map<std::string, std::string> holders;
  for (const ExpiredFire& e : *lost) holders[e.fire.job_id] = e.node_id;
  EXPECT_EQ(holders, (std::map<std::string, std::string>{{"job-2", "new"}, {"job-7", "old"}}));
}

}  // namespace gnomon::testing
