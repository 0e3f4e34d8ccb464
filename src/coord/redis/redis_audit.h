// RedisAudit (internal): RedisCoordinator's AuditStore (gnomon/audit_store.h): records in the
// zsets B:audit and (failed calls, status >= 400) B:audit_failed, each capped apart to the newest
// `keep` by the append script; seq comes from B:meta audit_seq. Listing merges both, newest first.
//
// Thread safety: safe to call from many threads at once (state lives on the server).
#ifndef GNOMON_SRC_COORD_REDIS_REDIS_AUDIT_H_
#define GNOMON_SRC_COORD_REDIS_REDIS_AUDIT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/coordinator.h"
#include "src/coord/redis/redis_store.h"

namespace gnomon::coord {

class RedisAudit {
 public:
  // `store` must outlive this object.
  explicit RedisAudit(RedisStore& store) : store_(store) {}
  RedisAudit(const RedisAudit&) = delete;
  RedisAudit& operator=(const RedisAudit&) = delete;

  Result<int64_t> AppendAudit(const AuditRecord& record, int keep);
  Result<std::vector<AuditRecord>> ListAudit(int limit, int64_t before_seq);

 private:
  RedisStore& store_;
};

}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_REDIS_REDIS_AUDIT_H_
