// Rendezvous (highest-random-weight) ranking of nodes for a job's fires (internal).
//
// Every node computes the same weight for (node, job, shard) from the ids alone, so nodes that
// see the same live set agree on the order without talking: the node of highest weight owns the
// fires of that job shard, the next one takes over after one takeover_delay if no claim exists,
// and so on. When a node joins or leaves, only the job shards it gains or owned change owner
// (about 1/N of them). Ownership is an optimisation on top of per-fire claims, never a
// replacement: nodes that disagree on the live set both claim, and the backend picks one.
#ifndef GNOMON_SRC_SCHEDULE_RENDEZVOUS_H_
#define GNOMON_SRC_SCHEDULE_RENDEZVOUS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace gnomon::internal {

// A well-mixed 64-bit weight of (node, job, shard).
uint64_t RendezvousWeight(std::string_view node_id, std::string_view job_id, int shard);

// The position of `self` (0 = owner) among `nodes` ∪ {self} ordered by weight, highest first
// (ties broken by node id). Duplicates in `nodes` are ignored.
int RendezvousRank(const std::vector<std::string>& nodes, std::string_view self,
                   std::string_view job_id, int shard);

// The owner (rank 0) of (job, shard) among `nodes` (non-empty).
const std::string& RendezvousOwner(const std::vector<std::string>& nodes, std::string_view job_id,
                                   int shard);

}  // namespace gnomon::internal

#endif  // GNOMON_SRC_SCHEDULE_RENDEZVOUS_H_
