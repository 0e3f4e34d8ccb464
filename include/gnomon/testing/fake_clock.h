// FakeClock: a Clock that only moves when a test says so. Advance() wakes every waiter, so code
// that waits on the Clock runs deterministically, with no real sleeps, through DST changes and
// leap days. Thread-safe.
#ifndef GNOMON_TESTING_FAKE_CLOCK_H_
#define GNOMON_TESTING_FAKE_CLOCK_H_

#include <atomic>
#include <condition_variable>
#include <list>
#include <mutex>

#include "gnomon/time.h"

namespace gnomon::testing {

class FakeClock final : public Clock {
 public:
  // Starts at `start` (wall) and steady time 0.
  explicit FakeClock(Instant start = Instant::FromUnixSeconds(1767225600));  // 2026-01-01Z

  Instant Now() const override;
  Duration SteadyNow() const override;
  bool WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv, Instant deadline,
                 const std::function<bool()>& ready) override;
  bool WaitUntilSteady(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                       Duration steady_deadline, const std::function<bool()>& ready) override;

  // Moves both wall and steady time forward by `d` (REQUIRES: d >= 0) and wakes all waiters.
  void Advance(Duration d);
  // Sets the wall clock alone (an NTP step, either direction) and wakes all waiters.
  void SetWall(Instant t);

  // Number of threads currently inside WaitUntil/WaitUntilSteady.
  int waiters() const;
  // Blocks (really, up to `real_timeout`) until at least `n` threads are waiting. Returns whether
  // they are. For tests that must know a background thread has gone idle before advancing.
  bool AwaitWaiters(int n, std::chrono::milliseconds real_timeout = std::chrono::seconds(10));

 private:
  struct Waiter {
    std::mutex* mutex;
    std::condition_variable* cv;
  };
  bool Wait(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
            const std::function<bool()>& expired, const std::function<bool()>& ready);
  void WakeAll();

  std::atomic<int64_t> wall_ms_;
  std::atomic<int64_t> steady_ms_{0};
  mutable std::mutex registry_mu_;  // guards waiters_; held while waking them
  std::condition_variable registry_cv_;
  std::list<Waiter> waiters_;
};

}  // namespace gnomon::testing

#endif  // GNOMON_TESTING_FAKE_CLOCK_H_
