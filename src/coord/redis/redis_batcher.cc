#include "src/coord/redis/redis_batcher.h"

#include <algorithm>
#include <utility>

namespace gnomon::coord {

RedisBatcher::RedisBatcher(size_t max_batch, SendFn send)
    : max_batch_(std::max<size_t>(1, max_batch)), send_(std::move(send)) {}

Result<RedisReply> RedisBatcher::Submit(Item item) {
  Slot mine{std::move(item), std::nullopt, {}};
  std::unique_lock<std::mutex> lock(mu_);
  waiting_.push_back(&mine);
  while (!mine.reply) {
    if (sending_) {
      mine.cv.wait(lock);
      continue;
    }
    // This caller sends: the oldest waiting calls, its own among them sooner or later.
    sending_ = true;
    std::vector<Slot*> batch;
    while (!waiting_.empty() && batch.size() < max_batch_) {
      batch.push_back(waiting_.front());
      waiting_.pop_front();
    }
    lock.unlock();
    std::vector<const Item*> items;
    items.reserve(batch.size());
    for (const Slot* s : batch) items.push_back(&s->item);
    Result<RedisReply> r = send_(items);
    const bool shaped =
        r.ok() && r->type == RedisReply::Type::kArray && r->elements.size() == batch.size();
    lock.lock();
    for (size_t k = 0; k < batch.size(); ++k) {
      if (shaped && r->elements[k].is_error()) {
        // This item's part of the batch failed (RedisStore::EvalBatch under a Cluster).
        batch[k]->reply.emplace(UnavailableError(r->elements[k].str));
      } else if (shaped) {
        batch[k]->reply.emplace(std::move(r->elements[k]));
      } else if (!r.ok()) {
        batch[k]->reply.emplace(r.status());
      } else {
        batch[k]->reply.emplace(
            InternalError("redis: malformed reply to a batch of " + std::to_string(batch.size())));
      }
    }
    sending_ = false;
    // Wake the callers just answered, and the oldest waiting one: it sends next. Nobody else
    // (a wake-up of every waiter per batch costs each a context switch).
    for (Slot* s : batch) {
      if (s != &mine) s->cv.notify_one();
    }
    if (!waiting_.empty()) waiting_.front()->cv.notify_one();
  }
  return std::move(*mine.reply);
}

size_t RedisBatcher::waiting() {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_.size();
}

}  // namespace gnomon::coord
