#include "src/server/queue_payload.h"

#include <nlohmann/json.hpp>

#include "src/server/job_json.h"

namespace gnomon::server {

using json = nlohmann::json;

std::string EncodeQueuedFire(const JobSpec& job, const Claim& claim) {
  json j;
  j["v"] = 1;
  j["job"] = JobSpecToJson(job);
  // Whether the worker applies the executor policy: jobs defined through the API.
  j["source"] = job.source == "api" ? "api" : "file";
  j["job_id"] = claim.fire.job_id;
  j["scheduled_ms"] = claim.fire.scheduled_at.unix_millis();
  j["shard"] = claim.fire.shard;
  j["shard_count"] = claim.fire.shard_count;
  j["attempt"] = claim.attempt;
  j["token"] = claim.fencing_token;
  j["node"] = claim.node_id;
  j["lease_ms"] = claim.lease_expires_at.unix_millis();
  return DumpJson(j);
}

Result<QueuedFire> DecodeQueuedFire(std::string_view payload) {
  Result<json> j = ParseJsonBody(payload);
  if (!j.ok()) return InvalidArgumentError("queue entry: " + j.status().message());
  try {
    if (!j->is_object() || j->value("v", 0) != 1) {
      return InvalidArgumentError("queue entry: not a version-1 gnomon entry");
    }
    QueuedFire out;
    Result<JobSpec> spec = JobSpecFromJson(j->at("job"));
    if (!spec.ok()) return InvalidArgumentError("queue entry: job: " + spec.status().message());
    out.job = std::move(*spec);
    // A job from a file runs with its full rights; any other entry (an API definition, or one
    // that does not say) is bound by the worker's executor policy.
    out.job.source = j->value("source", "") == "file" ? "queue" : "api";
    out.job.read_only = true;
    GNOMON_RETURN_IF_ERROR(ValidateJobSpec(out.job).WithPrefix("queue entry"));
    out.claim.fire.job_id = j->at("job_id").get<std::string>();
    out.claim.fire.scheduled_at = Instant::FromUnixMillis(j->at("scheduled_ms").get<int64_t>());
    out.claim.fire.shard = j->at("shard").get<int>();
    out.claim.fire.shard_count = j->at("shard_count").get<int>();
    out.claim.attempt = j->at("attempt").get<int>();
    out.claim.fencing_token = j->at("token").get<int64_t>();
    out.claim.node_id = j->at("node").get<std::string>();
    out.claim.lease_expires_at = Instant::FromUnixMillis(j->at("lease_ms").get<int64_t>());
    if (out.claim.fire.job_id != out.job.id) {
      return InvalidArgumentError("queue entry: job_id differs from the job's id");
    }
    return out;
  } catch (const std::exception& e) {
    return InvalidArgumentError(std::string("queue entry: ") + e.what());
  }
}

}  // namespace gnomon::server
