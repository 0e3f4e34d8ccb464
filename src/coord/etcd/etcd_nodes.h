// EtcdNodes: the etcd backend's node registry (internal): heartbeats under <p>nodes/<node>
// (JSON NodeInfo with its expiry, unix ms of the backend clock) and their listing, which drops
// expired entries as it reads them (best effort).
//
// Thread safety: safe from many threads (no state of its own).
#ifndef GNOMON_SRC_COORD_ETCD_ETCD_NODES_H_
#define GNOMON_SRC_COORD_ETCD_ETCD_NODES_H_

#include <functional>
#include <utility>
#include <vector>

#include "gnomon/coordinator.h"
#include "src/coord/etcd/etcd_keyspace.h"
#include "src/coord/etcd/etcd_kv.h"

namespace gnomon::coord::etcd {

class EtcdNodes {
 public:
  // `now`: the backend clock. REQUIRES: `kv` and `keys` outlive this object.
  EtcdNodes(EtcdKv& kv, const EtcdKeyspace& keys, std::function<Instant()> now)
      : kv_(kv), keys_(keys), now_(std::move(now)) {}

  // As the Coordinator methods of the same names.
  Status Heartbeat(const NodeInfo& node, Duration ttl);
  Result<std::vector<NodeInfo>> ListNodes();

 private:
  EtcdKv& kv_;
  const EtcdKeyspace& keys_;
  const std::function<Instant()> now_;
};

}  // namespace gnomon::coord::etcd

#endif  // GNOMON_SRC_COORD_ETCD_ETCD_NODES_H_
