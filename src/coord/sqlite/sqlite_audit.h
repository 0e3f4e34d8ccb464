// SqliteAudit (internal): SqliteCoordinator's AuditStore (gnomon/audit_store.h) over the
// `audit` table: AppendAudit inserts and trims to the newest `keep` (successes and failures
// capped apart) in one transaction; ListAudit reads newest first.
//
// Thread safety: safe to call from many threads at once (writes hold the store's write mutex for
// their transaction; reads use a read connection of the store).
#ifndef GNOMON_SRC_COORD_SQLITE_SQLITE_AUDIT_H_
#define GNOMON_SRC_COORD_SQLITE_SQLITE_AUDIT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/coordinator.h"
#include "src/coord/sqlite/sqlite_store.h"

namespace gnomon::coord {

class SqliteAudit {
 public:
  // `store` must outlive this object.
  explicit SqliteAudit(SqliteStore& store) : store_(store) {}
  SqliteAudit(const SqliteAudit&) = delete;
  SqliteAudit& operator=(const SqliteAudit&) = delete;

  Result<int64_t> AppendAudit(const AuditRecord& record, int keep);
  Result<std::vector<AuditRecord>> ListAudit(int limit, int64_t before_seq);

 private:
  SqliteStore& store_;
};

}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_SQLITE_SQLITE_AUDIT_H_
