// RedisBatcher: concurrent calls of one kind sent to Redis as one script call (internal), a
// group commit. A call that finds no call of its kind in flight is sent at once, alone; calls
// that arrive while one is in flight wait, and the first of them to see it return sends every
// waiting one (up to `max_batch`) together. So under load the calls ride together, and the
// server and the client pay one round trip, one script call and one TIME per batch instead of
// per call; a call made alone waits for nobody. RedisCoordinator sends its claims (claim_one) and
// reports (report_one) this way. Each call gets its own element of the script's reply (a refused
// claim or a fenced-off report concerns that call only); a failed send (a lost connection, a
// timeout, a script error) is the answer of every call in the batch, as it would have been of
// each call sent alone.
//
// Thread safety: Submit may be called from many threads at once.
#ifndef GNOMON_SRC_COORD_REDIS_REDIS_BATCHER_H_
#define GNOMON_SRC_COORD_REDIS_REDIS_BATCHER_H_

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "gnomon/status.h"
#include "src/coord/redis/redis_connection.h"

namespace gnomon::coord {

class RedisBatcher {
 public:
  // One call's script arguments.
  using Item = std::vector<std::string>;
  // Sends `items` as one script call; its reply must be an array with one element per item, in
  // order. An error (or another reply) is every item's answer.
  using SendFn = std::function<Result<RedisReply>(const std::vector<const Item*>& items)>;

  RedisBatcher(size_t max_batch, SendFn send);

  // Sends `item` (alone or with others) and returns its own element of the reply.
  Result<RedisReply> Submit(Item item);

  // Calls waiting to be sent (for tests).
  size_t waiting();

 private:
  struct Slot {
    Item item;
    std::optional<Result<RedisReply>> reply;  // set by the sender, under mu_
    std::condition_variable cv;               // its caller waits here
  };

  const size_t max_batch_;
  const SendFn send_;
  std::mutex mu_;
  std::deque<Slot*> waiting_;  // guarded by mu_; not yet sent, in arrival order
  bool sending_ = false;       // guarded by mu_; a batch is in flight
};

}  // namespace gnomon::coord

#endif  // GNOMON_SRC_COORD_REDIS_REDIS_BATCHER_H_
