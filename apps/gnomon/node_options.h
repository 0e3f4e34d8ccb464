// The mapping from a loaded config (apps/gnomon/config.h) to what the daemon's library runs with
// (src/server/node.h, src/server/queue_worker.h). Pure functions; thread-compatible.
#ifndef GNOMON_APPS_GNOMON_NODE_OPTIONS_H_
#define GNOMON_APPS_GNOMON_NODE_OPTIONS_H_

#include "apps/gnomon/config.h"
#include "src/server/node.h"
#include "src/server/queue_worker.h"

namespace gnomon::app {

// The options of `gnomon serve`. InvalidArgument naming the config entry (file:line) for a bad
// token role.
Result<server::NodeOptions> NodeOptionsFor(const ServeConfig& config);
// What a SIGHUP applies, from a freshly loaded config.
Result<server::NodeReload> NodeReloadFor(const ServeConfig& config);
// The options of `gnomon worker`.
Result<server::QueueWorkerOptions> QueueWorkerOptionsFor(const ServeConfig& config);

}  // namespace gnomon::app

#endif  // GNOMON_APPS_GNOMON_NODE_OPTIONS_H_
