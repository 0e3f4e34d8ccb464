#include "gnomon/testing/fake_clock.h"

#include <gtest/gtest.h>

#include <thread>

namespace gnomon::testing {
namespace {

using std::chrono::seconds;

TEST(FakeClockTest, AdvanceMovesWallAndSteady) {
  FakeClock clock(Instant::FromUnixSeconds(100));
  clock.Advance(seconds(5));
  EXPECT_EQ(clock.Now(), Instant::FromUnixSeconds(105));
  EXPECT_EQ(clock.SteadyNow(), seconds(5));
  clock.SetWall(Instant::FromUnixSeconds(50));  // an NTP step back leaves steady time alone
  EXPECT_EQ(clock.Now(), Instant::FromUnixSeconds(50));
  EXPECT_EQ(clock.SteadyNow(), seconds(5));
}

TEST(FakeClockTest, AdvanceWakesAWallWaiterOnlyAtItsDeadline) {
  FakeClock clock(Instant::FromUnixSeconds(0));
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<bool> woke{false};
  std::jthread waiter([&] {
    std::unique_lock<std::mutex> lock(mu);
    clock.WaitUntil(lock, cv, Instant::FromUnixSeconds(10), [] { return false; });
    woke = true;
  });
  ASSERT_TRUE(clock.AwaitWaiters(1));
  clock.Advance(seconds(9));
  ASSERT_TRUE(clock.AwaitWaiters(1));
  EXPECT_FALSE(woke.load());
  clock.Advance(seconds(1));
  waiter.join();
  EXPECT_TRUE(woke.load());
  EXPECT_EQ(clock.waiters(), 0);
}

TEST(FakeClockTest, ReadyPredicateEndsTheWaitWithoutTime) {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  bool flag = false;
  bool result = false;
  std::jthread waiter([&] {
    std::unique_lock<std::mutex> lock(mu);
    result = clock.WaitUntilSteady(lock, cv, seconds(3600), [&] { return flag; });
  });
  ASSERT_TRUE(clock.AwaitWaiters(1));
  {
    std::lock_guard<std::mutex> g(mu);
    flag = true;
  }
  cv.notify_all();
  waiter.join();
  EXPECT_TRUE(result);
  EXPECT_EQ(clock.SteadyNow(), seconds(0));
}

TEST(FakeClockTest, SteadyWaiterIgnoresWallSteps) {
  FakeClock clock;
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<bool> done{false};
  std::jthread waiter([&] {
    std::unique_lock<std::mutex> lock(mu);
    clock.WaitFor(lock, cv, seconds(30), [] { return false; });
    done = true;
  });
  ASSERT_TRUE(clock.AwaitWaiters(1));
  clock.SetWall(clock.Now() + std::chrono::hours(1));
  ASSERT_TRUE(clock.AwaitWaiters(1));
  EXPECT_FALSE(done.load());
  clock.Advance(seconds(30));
  waiter.join();
  EXPECT_TRUE(done.load());
}

}  // namespace
}  // namespace gnomon::testing

namespace gnomon {
namespace {

// A "forever" deadline must wait, not overflow into an immediate timeout (a spinning waiter).
TEST(SystemClockTest, FarDeadlinesWaitUntilReady) {
  SystemClock& clock = SystemClock::Get();
  std::mutex mu;
  std::condition_variable cv;
  bool flag = false;
  int checks = 0;
  std::jthread waiter([&] {
    std::unique_lock<std::mutex> lock(mu);
    clock.WaitUntilSteady(lock, cv, Duration::max() / 2, [&] {
      ++checks;
      return flag;
    });
  });
  std::jthread waiter2([&] {
    std::unique_lock<std::mutex> lock(mu);
    clock.WaitUntil(lock, cv, Instant::Max(), [&] { return flag; });
  });
  // Let the waiters block (real time is fine here: this test is about the real clock).
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  {
    std::lock_guard<std::mutex> g(mu);
    EXPECT_LE(checks, 3) << "the waiter spun instead of blocking";
    flag = true;
  }
  cv.notify_all();
}

}  // namespace
}  // namespace gnomon
