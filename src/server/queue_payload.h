// The payload of a queue entry (queue mode): the job's definition and the claim a worker takes
// over, as JSON. Self-contained, so a worker needs no job files: it runs what it is handed.
#ifndef GNOMON_SRC_SERVER_QUEUE_PAYLOAD_H_
#define GNOMON_SRC_SERVER_QUEUE_PAYLOAD_H_

#include <string>
#include <string_view>

#include "gnomon/coordinator.h"
#include "gnomon/job.h"
#include "gnomon/status.h"

namespace gnomon::server {

struct QueuedFire {
  JobSpec job;
  Claim claim;
};

std::string EncodeQueuedFire(const JobSpec& job, const Claim& claim);
// InvalidArgument naming what is wrong (a malformed or foreign entry). The decoded job's source
// is "api" (bound by the worker's executor policy, PolicyGuard) unless the entry says the job
// came from a file ("queue": full rights).
Result<QueuedFire> DecodeQueuedFire(std::string_view payload);

}  // namespace gnomon::server

#endif  // GNOMON_SRC_SERVER_QUEUE_PAYLOAD_H_
