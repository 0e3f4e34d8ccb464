// MemoryAudit: the in-memory coordinator's audit log (internal): two classes of records
// (done, not done), each capped at the newest `keep`, numbered by one counter.
//
// Thread safety: safe from many threads; every method locks the shared MemoryState::mu for its
// whole run (the only lock).
#ifndef GNOMON_SRC_COORD_MEMORY_MEMORY_AUDIT_H_
#define GNOMON_SRC_COORD_MEMORY_MEMORY_AUDIT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/coordinator.h"
#include "src/coord/memory/memory_state.h"

namespace gnomon::coord::memory {

class MemoryAudit {
 public:
  // REQUIRES: `state` outlives this object.
  explicit MemoryAudit(MemoryState& state) : s_(state) {}

  // As the Coordinator methods of the same names.
  Result<int64_t> AppendAudit(const AuditRecord& record, int keep);
  Result<std::vector<AuditRecord>> ListAudit(int limit, int64_t before_seq);

 private:
  MemoryState& s_;
};

}  // namespace gnomon::coord::memory

#endif  // GNOMON_SRC_COORD_MEMORY_MEMORY_AUDIT_H_
