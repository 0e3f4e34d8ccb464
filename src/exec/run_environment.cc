// RunEnvironment (gnomon/executor.h): the variables of docs/guarantees.md "What a run sees".
#include <string>
#include <utility>
#include <vector>

#include "gnomon/executor.h"

namespace gnomon {

std::vector<std::pair<std::string, std::string>> RunEnvironment(const RunContext& ctx) {
  return {
      {"GNOMON_JOB_ID", ctx.job_id},
      {"GNOMON_RUN_ID", ctx.run_id},
      {"GNOMON_SCHEDULED_AT", ctx.scheduled_at.ToRfc3339()},
      {"GNOMON_FENCING_TOKEN", std::to_string(ctx.fencing_token)},
      {"GNOMON_ATTEMPT", std::to_string(ctx.attempt)},
      {"GNOMON_NODE_ID", ctx.node_id},
      {"GNOMON_SHARD_INDEX", std::to_string(ctx.shard_index)},
      {"GNOMON_SHARD_COUNT", std::to_string(ctx.shard_count)},
      {"GNOMON_DEADLINE", ctx.deadline ? ctx.deadline->ToRfc3339() : std::string()},
      {"GNOMON_CHECKPOINT", ctx.checkpoint.value_or(std::string())},
      {"GNOMON_TRACEPARENT", ctx.traceparent},
      {"GNOMON_PARAMS", ctx.params},
  };
}

}  // namespace gnomon
