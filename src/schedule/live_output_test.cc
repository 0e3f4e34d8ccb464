#include "src/schedule/live_output.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "gnomon/testing/fake_clock.h"
#include "gnomon/testing/forwarding_coordinator.h"
#include "gnomon/testing/memory_coordinator.h"

namespace gnomon::internal {
namespace {

using std::chrono::seconds;

// Counts the saves that reach the backend.
class CountingSaves : public testing::ForwardingCoordinator {
 public:
  using ForwardingCoordinator::ForwardingCoordinator;
  Status SaveLiveOutput(const gnomon::Claim& claim, const std::string& output) override {
    {
      std::lock_guard<std::mutex> lock(mu);
      saved.push_back(output);
    }
    return ForwardingCoordinator::SaveLiveOutput(claim, output);
  }
  size_t count() {
    std::lock_guard<std::mutex> lock(mu);
    return saved.size();
  }
  std::mutex mu;
  std::vector<std::string> saved;
};

class LiveOutputTest : public ::testing::Test {
 protected:
  LiveOutputTest()
      : clock_(Instant::FromUnixMillis(1'780'000'000'000)), mem_(clock_), coord_(mem_) {}

  gnomon::Claim ClaimFire() {
    ClaimRequest req{FireKey{"j", clock_.Now()}, "n", seconds(30), seconds(1),
                     OverlapPolicy::kAllow};
    Result<ClaimOutcome> out = mem_.Claim(req);
    EXPECT_TRUE(out.ok() && out->claim);
    return *out->claim;
  }
  std::string RecordedOutput(const gnomon::Claim& c) {
    Result<std::vector<RunRecord>> runs = mem_.GetRun(c.fire.RunId());
    return runs.ok() && !runs->empty() ? runs->front().output : "<none>";
  }
  // One publishing round: the publisher waits on the clock, the interval passes, it saves.
  void Round(LiveOutput& live) {
    const uint64_t before = live.rounds();
    ASSERT_TRUE(clock_.AwaitWaiters(1));
    clock_.Advance(seconds(1));
    ASSERT_TRUE(live.AwaitRounds(before + 1, std::chrono::seconds(10)));
  }

  testing::FakeClock clock_;
  testing::MemoryCoordinator mem_;
  CountingSaves coord_;
};

TEST_F(LiveOutputTest, ATailKeepsTheLastBytes) {
  LiveOutput::Tail tail(gnomon::Claim{});
  tail.Append("abc");
  EXPECT_EQ(tail.Contents(), "abc");
  std::string big(kMaxOutputBytes, 'x');
  for (int i = 0; i < 5; ++i) tail.Append(big.substr(0, kMaxOutputBytes / 3));
  tail.Append("end");
  const std::string c = tail.Contents();
  EXPECT_EQ(c.size(), kMaxOutputBytes);
  EXPECT_EQ(c.substr(c.size() - 3), "end");
  tail.Append(std::string(kMaxOutputBytes + 5, 'y'));
  EXPECT_EQ(tail.Contents(), std::string(kMaxOutputBytes, 'y'));
}

// A changed tail is saved once per interval, an unchanged one not at all, a closed one never.
TEST_F(LiveOutputTest, SavesEachChangedTailOncePerInterval) {
  LiveOutput live(coord_, clock_, seconds(1));
  live.Start();
  const gnomon::Claim c = ClaimFire();
  std::shared_ptr<LiveOutput::Tail> tail = live.Open(c);
  tail->Append("line 1\n");
  tail->Append("line 2\n");
  Round(live);
  ASSERT_EQ(coord_.count(), 1u);
  EXPECT_EQ(RecordedOutput(c), "line 1\nline 2\n");
  Round(live);  // nothing new: no write
  Round(live);
  EXPECT_EQ(coord_.count(), 1u);
  tail->Append("line 3\n");
  Round(live);
  ASSERT_EQ(coord_.count(), 2u);
  EXPECT_EQ(RecordedOutput(c), "line 1\nline 2\nline 3\n");
  live.Close(tail);
  tail->Append("after close\n");
  Round(live);
  Round(live);
  EXPECT_EQ(coord_.count(), 2u);
  live.Stop();
}

TEST_F(LiveOutputTest, AZeroIntervalPublishesNothing) {
  LiveOutput live(coord_, clock_, Duration::zero());
  live.Start();
  std::shared_ptr<LiveOutput::Tail> tail = live.Open(ClaimFire());
  tail->Append("x");
  EXPECT_EQ(tail->Contents(), "x");
  EXPECT_EQ(clock_.waiters(), 0);
  live.Stop();
  EXPECT_EQ(coord_.count(), 0u);
}

}  // namespace
}  // namespace gnomon::internal
