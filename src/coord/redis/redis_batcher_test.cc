#include "src/coord/redis/redis_batcher.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace gnomon::coord {
namespace {

RedisReply Text(std::string s) {
  RedisReply r;
  r.type = RedisReply::Type::kString;
  r.str = std::move(s);
  return r;
}

// A sender that answers each item with "re:<first argument>" and records the batches; the
// first batch waits until `hold_until_waiting` calls queue behind it.
struct Recorder {
  RedisBatcher* batcher = nullptr;
  size_t hold_until_waiting = 0;
  std::mutex mu;
  std::vector<std::vector<std::string>> batches;  // first arguments, per batch
  std::atomic<int> calls{0};

  Result<RedisReply> Send(const std::vector<const RedisBatcher::Item*>& items) {
    if (calls++ == 0) {
      while (batcher->waiting() < hold_until_waiting) std::this_thread::yield();
    }
    RedisReply out;
    out.type = RedisReply::Type::kArray;
    std::vector<std::string> firsts;
    for (const RedisBatcher::Item* item : items) {
      firsts.push_back(item->front());
      out.elements.push_back(Text("re:" + item->front()));
    }
    std::lock_guard<std::mutex> lock(mu);
    batches.push_back(firsts);
    return out;
  }
};

TEST(RedisBatcherTest, ACallAloneIsSentAtOnceAlone) {
  Recorder rec;
  RedisBatcher b(8, [&](const auto& items) { return rec.Send(items); });
  rec.batcher = &b;
  Result<RedisReply> r = b.Submit({"a"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->str, "re:a");
  ASSERT_EQ(rec.batches.size(), 1u);
  EXPECT_EQ(rec.batches[0], std::vector<std::string>{"a"});
}

TEST(RedisBatcherTest, CallsMadeWhileOneIsInFlightGoTogetherEachWithItsOwnAnswer) {
  Recorder rec;
  RedisBatcher b(3, [&](const auto& items) { return rec.Send(items); });
  rec.batcher = &b;
  rec.hold_until_waiting = 5;
  std::vector<std::string> got(6);
  std::vector<std::thread> threads;
  threads.emplace_back([&] { got[0] = b.Submit({"c0"})->str; });
  while (rec.calls.load() == 0) std::this_thread::yield();  // c0 is in flight
  for (int i = 1; i <= 5; ++i) {
    threads.emplace_back([&, i] { got[i] = b.Submit({"c" + std::to_string(i)})->str; });
  }
  for (std::thread& t : threads) t.join();
  for (int i = 0; i <= 5; ++i) EXPECT_EQ(got[i], "re:c" + std::to_string(i));
  // c0 alone, then the five that waited in two batches of at most three, oldest first.
  ASSERT_EQ(rec.batches.size(), 3u);
  EXPECT_EQ(rec.batches[0].size(), 1u);
  EXPECT_EQ(rec.batches[1].size(), 3u);
  EXPECT_EQ(rec.batches[2].size(), 2u);
}

TEST(RedisBatcherTest, AFailedOrMisshapenSendIsTheAnswerOfEveryCallInIt) {
  std::atomic<int> mode{0};
  RedisBatcher b(8, [&](const auto& items) -> Result<RedisReply> {
    if (mode == 0) return UnavailableError("redis: connection refused");
    RedisReply out;
    out.type = RedisReply::Type::kArray;
    out.elements.resize(items.size() + 1);  // one too many
    return out;
  });
  Result<RedisReply> down = b.Submit({"x"});
  EXPECT_EQ(down.status().code(), StatusCode::kUnavailable);
  mode = 1;
  Result<RedisReply> odd = b.Submit({"y"});
  EXPECT_EQ(odd.status().code(), StatusCode::kInternal);
  EXPECT_EQ(b.waiting(), 0u);
}

}  // namespace
}  // namespace gnomon::coord
