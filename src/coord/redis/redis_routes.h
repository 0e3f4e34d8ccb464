// RedisRoutes: the listeners told when the server that answers for a part of the keyspace may
// have changed (internal; ClaimStore::AddRoutesListener is what the scheduler sees). A
// RedisStore has one, shared by every connection it makes (RedisConnectionConfig::routes):
//   - under Sentinel, a connection that asks the sentinels for the primary reports the answer
//     (PrimaryIs): a primary other than the one they named before (a failover) calls the
//     listeners, once for the whole store, whichever of its connections found it first;
//   - under a Cluster, RedisClusterClient calls them (Changed) when a read of the slot map gives
//     slots to another primary and when a primary held down answers a probe again.
// Claims that failed on the old server may succeed now: the scheduler makes them again at once.
//
// Thread safety: every method is safe to call from many threads at once. mu_ is held while the
// listeners are called, so Remove waits for a call under way; a listener must not block.
#ifndef GNOMON_SRC_COORD_REDIS_REDIS_ROUTES_H_
#define GNOMON_SRC_COORD_REDIS_REDIS_ROUTES_H_

#include <functional>
#include <map>
#include <string>

#include "src/base/thread_annotations.h"

namespace gnomon::coord {

class RedisRoutes {
 public:
  // Returns a handle for Remove.
  int Add(std::function<void()> listener) GNOMON_EXCLUDES(mu_);
  // After it returns, the listener is not called (a call under way was waited for).
  void Remove(int handle) GNOMON_EXCLUDES(mu_);
  // Calls every listener, on the calling thread.
  void Changed() GNOMON_EXCLUDES(mu_);
  // The sentinels named `address` ("host:port") as the primary: Changed() when they named
  // another one before (the first answer calls nothing).
  void PrimaryIs(const std::string& address) GNOMON_EXCLUDES(mu_, primary_mu_);

 private:
  Mutex mu_;
  std::map<int, std::function<void()>> listeners_ GNOMON_GUARDED_BY(mu_);
  int next_ GNOMON_GUARDED_BY(mu_) = 1;
  Mutex primary_mu_;
  std::string primary_ GNOMON_GUARDED_BY(primary_mu_);  // the last one named; empty: none yet
};

}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_REDIS_REDIS_ROUTES_H_
