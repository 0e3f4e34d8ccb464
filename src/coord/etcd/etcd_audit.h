// EtcdAudit: the etcd backend's audit log (internal): records under <p>audit/<seq> (calls that
// were done) and <p>auditfail/<seq> (the others), numbered by the counter <p>auditseq; each
// class keeps its newest `keep` records, the older ones deleted in the append's own txn.
//
// Thread safety: safe from many threads (no state of its own; appends are optimistic rounds on
// <p>auditseq).
#ifndef GNOMON_SRC_COORD_ETCD_ETCD_AUDIT_H_
#define GNOMON_SRC_COORD_ETCD_ETCD_AUDIT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "gnomon/coordinator.h"
#include "src/coord/etcd/etcd_keyspace.h"
#include "src/coord/etcd/etcd_kv.h"

namespace gnomon::coord::etcd {

class EtcdAudit {
 public:
  // `now`: the backend clock (a record's `at`). REQUIRES: `kv` and `keys` outlive this object.
  EtcdAudit(EtcdKv& kv, const EtcdKeyspace& keys, std::function<Instant()> now)
      : kv_(kv), keys_(keys), now_(std::move(now)) {}

  // As the Coordinator methods of the same names.
  Result<int64_t> AppendAudit(const AuditRecord& record, int keep);
  Result<std::vector<AuditRecord>> ListAudit(int limit, int64_t before_seq);

 private:
  // The key before which the records under `prefix` are older than its newest `keep`; "" when
  // there are at most `keep`.
  Result<std::string> AuditCut(const std::string& prefix, int keep);

  EtcdKv& kv_;
  const EtcdKeyspace& keys_;
  const std::function<Instant()> now_;
};

}  // namespace gnomon::coord::etcd

#endif  // GNOMON_SRC_COORD_ETCD_ETCD_AUDIT_H_
