// SqliteNodes (internal): SqliteCoordinator's NodeRegistry (gnomon/node_registry.h) over the
// `nodes` table: a heartbeat upserts the node's row (and drops expired ones) in one transaction on
// the write connection; ListNodes reads the live rows, sorted by node id.
//
// Thread safety: safe to call from many threads at once (writes hold the store's write mutex for
// their transaction; reads use a read connection of the store).
#ifndef GNOMON_SRC_COORD_SQLITE_SQLITE_NODES_H_
#define GNOMON_SRC_COORD_SQLITE_SQLITE_NODES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/coordinator.h"
#include "src/coord/sqlite/sqlite_store.h"

namespace gnomon::coord {

class SqliteNodes {
 public:
  // `store` must outlive this object.
  explicit SqliteNodes(SqliteStore& store) : store_(store) {}
  SqliteNodes(const SqliteNodes&) = delete;
  SqliteNodes& operator=(const SqliteNodes&) = delete;

  Status Heartbeat(const NodeInfo& node, Duration ttl);
  Result<std::vector<NodeInfo>> ListNodes();

 private:
  SqliteStore& store_;
};

}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_SQLITE_SQLITE_NODES_H_
