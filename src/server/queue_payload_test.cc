#include "src/server/queue_payload.h"

#include <gtest/gtest.h>

namespace gnomon::server {
namespace {

TEST(QueuePayloadTest, RoundTripsTheJobAndTheClaim) {
  JobSpec job;
  job.id = "settle";
  job.schedule = "0 0 2 1 * *";
  job.timezone = "Asia/Shanghai";
  job.command = "/opt/settle --month=prev";
  job.retries = 2;
  job.queue = "gpu";
  job.env = {{"MODE", "strict"}};
  Claim claim;
  claim.fire = FireKey{"settle", Instant::FromUnixMillis(1796000000123), 2, 4};
  claim.attempt = 3;
  claim.fencing_token = 1796000000123456;
  claim.node_id = "sched-1";
  claim.lease_expires_at = Instant::FromUnixMillis(1796000030123);
  Result<QueuedFire> back = DecodeQueuedFire(EncodeQueuedFire(job, claim));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->job.id, "settle");
  EXPECT_EQ(back->job.command, job.command);
  EXPECT_EQ(back->job.timezone, "Asia/Shanghai");
  EXPECT_EQ(back->job.retries, 2);
  EXPECT_EQ(back->job.queue, "gpu");
  EXPECT_EQ(back->job.env, job.env);
  EXPECT_EQ(back->claim.fire.RunId(), claim.fire.RunId());
  EXPECT_EQ(back->claim.fire.shard_count, 4);
  EXPECT_EQ(back->claim.attempt, 3);
  EXPECT_EQ(back->claim.fencing_token, claim.fencing_token);
  EXPECT_EQ(back->claim.node_id, "sched-1");
  EXPECT_EQ(back->claim.lease_expires_at, claim.lease_expires_at);
}

TEST(QueuePayloadTest, OnlyJobsFromFilesEscapeTheWorkersPolicy) {
  JobSpec job;
  job.id = "team.x";
  job.schedule = "@daily";
  job.command = "true";
  Claim claim;
  claim.fire = FireKey{"team.x", Instant::FromUnixMillis(1796000000000), 0, 1};
  claim.node_id = "s1";
  job.source = "api";
  EXPECT_EQ(DecodeQueuedFire(EncodeQueuedFire(job, claim))->job.source, "api");
  job.source = "jobs.toml:3";
  EXPECT_EQ(DecodeQueuedFire(EncodeQueuedFire(job, claim))->job.source, "queue");
  // An entry that does not say where its job came from is bound by the policy.
  std::string payload = EncodeQueuedFire(job, claim);
  const size_t at = payload.find("\"source\":\"file\"");
  ASSERT_NE(at, std::string::npos) << payload;
  payload.replace(at, 15, "\"origin\":\"file\"");
  Result<QueuedFire> unsaid = DecodeQueuedFire(payload);
  ASSERT_TRUE(unsaid.ok()) << unsaid.status().ToString() << payload;
  EXPECT_EQ(unsaid->job.source, "api");
}

TEST(QueuePayloadTest, ForeignOrBrokenEntriesAreErrors) {
  for (const char* bad :
       {"", "null", "{}", R"({"v":2})", R"({"v":1,"job":{}})",
        R"({"v":1,"job":{"id":"a","schedule":"@daily","command":"true"}})", "not json"}) {
    EXPECT_EQ(DecodeQueuedFire(bad).status().code(), StatusCode::kInvalidArgument) << bad;
  }
}

}  // namespace
}  // namespace gnomon::server
