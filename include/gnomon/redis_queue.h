// RedisQueue: the work queue of queue mode (`gnomon serve --mode schedule` publishes claimed
// fires; `gnomon worker` processes take them), on Redis Streams with a consumer group.
//
// One stream per worker tag, `<prefix>:<ns>:queue:<tag>`, and one consumer group ("workers").
// Publish = XADD. Take = first XAUTOCLAIM of entries idle longer than `reclaim_after` (their
// worker crashed or froze: it stopped touching them), then XREADGROUP of new entries. While an
// entry is worked on, its worker calls Touch (XCLAIM to itself, JUSTID) every renew interval,
// which resets its idle time, so only entries of dead workers are reclaimed. Done = XACK + XDEL
// in one script: the stream holds only entries not yet done, so it stays small and no trimming
// can drop a pending entry (nothing is ever trimmed).
//
// Payloads are opaque bytes (the daemon encodes the job and the claim as JSON). Deduplication is
// the caller's: an entry may be delivered more than once (reclaimed), and the fenced claim inside
// decides (a stale one fails its renew with LeaseLost and is dropped).
//
// Thread safety: safe to call from many threads (one connection, serialised); Take blocks the
// connection for at most `block`, so keep it short (e.g. 1 s) when other threads call Done.
#ifndef GNOMON_REDIS_QUEUE_H_
#define GNOMON_REDIS_QUEUE_H_

#include <memory>
#include <string>
#include <vector>

#include "gnomon/redis_coordinator.h"
#include "gnomon/status.h"
#include "gnomon/time.h"

namespace gnomon {
namespace coord {
class RedisConnection;
}  // namespace coord

struct QueueEntry {
  std::string tag;         // the stream's worker tag
  std::string id;          // the stream entry id
  std::string payload;     // what Publish was given
  bool reclaimed = false;  // taken over from another consumer (XAUTOCLAIM)
};

class RedisQueue {
 public:
  // Connects (host, port, credentials, db, prefix, ns and timeouts of `options`; Sentinel and
  // TLS too). Errors as RedisCoordinator::Open's: InvalidArgument for bad options (a TLS file
  // that cannot be read), Unavailable when the server cannot be reached, refuses the credentials
  // or fails the TLS handshake (the message names it).
  static Result<std::unique_ptr<RedisQueue>> Open(const RedisOptions& options);
  ~RedisQueue();
  RedisQueue(const RedisQueue&) = delete;
  RedisQueue& operator=(const RedisQueue&) = delete;

  // Appends `payload` to the stream of `tag` ([A-Za-z0-9_.-]{1,64}).
  Status Publish(const std::string& tag, const std::string& payload);
  // Up to `count` entries for `consumer` from the streams of `tags`: reclaimed ones first (idle
  // longer than `reclaim_after`), then new ones, waiting up to `block` for any.
  Result<std::vector<QueueEntry>> Take(const std::vector<std::string>& tags,
                                       const std::string& consumer, int count, Duration block,
                                       Duration reclaim_after);
  // Resets the idle time of entries `consumer` is working on.
  Status Touch(const std::vector<QueueEntry>& entries, const std::string& consumer);
  // Acknowledges and deletes the entry.
  Status Done(const QueueEntry& entry);
  // Entries in the stream of `tag` (not yet done: waiting or being worked on).
  Result<int64_t> Length(const std::string& tag);
  // Entries delivered to a consumer and not yet done.
  Result<int64_t> Pending(const std::string& tag);

 private:
  RedisQueue(std::string base, std::unique_ptr<coord::RedisConnection> conn);
  std::string Stream(const std::string& tag) const;
  Status EnsureGroup(const std::string& tag);

  const std::string base_;
  std::unique_ptr<coord::RedisConnection> conn_;
  int done_script_ = -1;
};

}  // namespace gnomon

#endif  // GNOMON_REDIS_QUEUE_H_
