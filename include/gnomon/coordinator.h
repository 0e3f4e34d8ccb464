// Coordinator: the shared state of a gnomon cluster, kept in one backend (memory for tests,
// SQLite, Redis, etcd). It is the sum of five role interfaces, each in its own header with its
// contract; code that needs one role takes that role:
//
//   ClaimStore       gnomon/claim_store.h       which node runs each fire: claims, leases,
//                                               fenced reports, lost runs, checkpoints, live
//                                               output, job state (pause, failures)
//   RunHistory       gnomon/run_history.h       the record of every attempt: list, get, prune
//   DefinitionStore  gnomon/definition_store.h  job definitions made at run time (opaque bytes,
//                                               versioned) and the change signal
//   AuditStore       gnomon/audit_store.h       the audit log of the calls that change jobs
//   NodeRegistry     gnomon/node_registry.h     node heartbeats
//
// Every backend implements all five in one class and passes the conformance suite of each role
// (src/coord/*_conformance.cc). The roles share the backend's clock, and some of their state: a
// claim writes the records RunHistory lists, pausing a job (ClaimStore::SetPaused) and
// cancelling a fire change DefinitionStore::JobsVersion.
//
// Thread safety: implementations are safe to call from many threads at once.
#ifndef GNOMON_COORDINATOR_H_
#define GNOMON_COORDINATOR_H_

#include <vector>

#include "gnomon/audit_store.h"
#include "gnomon/claim_store.h"
#include "gnomon/definition_store.h"
#include "gnomon/node_registry.h"
#include "gnomon/run_history.h"

namespace gnomon {

class Coordinator : public ClaimStore,
                    public RunHistory,
                    public DefinitionStore,
                    public AuditStore,
                    public NodeRegistry {
 public:
  ~Coordinator() override = default;

  // ClaimStore::FiresRecorded by RunHistory::GetRun per fire (a pruned fire's answer may then be
  // false, which only costs a refused Claim). Backends override it with one round trip.
  Result<std::vector<bool>> FiresRecorded(const std::vector<FireKey>& fires) override;
};

inline Result<std::vector<bool>> Coordinator::FiresRecorded(const std::vector<FireKey>& fires) {
  std::vector<bool> out;
  out.reserve(fires.size());
  for (const FireKey& f : fires) {
    Result<std::vector<RunRecord>> run = GetRun(f.RunId());
    if (!run.ok() && run.status().code() != StatusCode::kNotFound) return run.status();
    bool recorded = false;
    if (run.ok()) {
      for (const RunRecord& r : *run) recorded = recorded || r.shard == f.shard;
    }
    out.push_back(recorded);
  }
  return out;
}

}  // namespace gnomon

#endif  // GNOMON_COORDINATOR_H_
