#include "gnomon/testing/fake_clock.h"

#include <thread>

namespace gnomon::testing {

FakeClock::FakeClock(Instant start) : wall_ms_(start.unix_millis()) {}

Instant FakeClock::Now() const { return Instant::FromUnixMillis(wall_ms_.load()); }

Duration FakeClock::SteadyNow() const { return Duration(steady_ms_.load()); }

bool FakeClock::Wait(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                     const std::function<bool()>& expired, const std::function<bool()>& ready) {
  // Register before checking the deadline: an Advance after registration locks our mutex before
  // notifying, so it cannot slip between our check and our wait. The caller's lock is released
  // while the registry is touched, so Advance (registry, then waiter mutex) cannot deadlock us.
  std::list<Waiter>::iterator self;
  lock.unlock();
  {
    std::lock_guard<std::mutex> g(registry_mu_);
    self = waiters_.insert(waiters_.end(), Waiter{lock.mutex(), &cv});
  }
  registry_cv_.notify_all();
  lock.lock();
  while (!ready() && !expired()) cv.wait(lock);
  lock.unlock();
  {
    std::lock_guard<std::mutex> g(registry_mu_);
    waiters_.erase(self);
  }
  registry_cv_.notify_all();
  lock.lock();
  return ready();
}

bool FakeClock::WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                          Instant deadline, const std::function<bool()>& ready) {
  return Wait(
      lock, cv, [&] { return Now() >= deadline; }, ready);
}

bool FakeClock::WaitUntilSteady(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                                Duration steady_deadline, const std::function<bool()>& ready) {
  return Wait(
      lock, cv, [&] { return SteadyNow() >= steady_deadline; }, ready);
}

void FakeClock::WakeAll() {
  std::lock_guard<std::mutex> g(registry_mu_);
  for (const Waiter& w : waiters_) {
    { std::lock_guard<std::mutex> waiter_lock(*w.mutex); }
    w.cv->notify_all();
  }
}

void FakeClock::Advance(Duration d) {
  GNOMON_CHECK(d.count() >= 0);
  {
    // Both clocks move under the registry lock so a waiter never sees one moved and not the other.
    std::lock_guard<std::mutex> g(registry_mu_);
    wall_ms_ += d.count();
    steady_ms_ += d.count();
  }
  WakeAll();
}

void FakeClock::SetWall(Instant t) {
  wall_ms_ = t.unix_millis();
  WakeAll();
}

int FakeClock::waiters() const {
  std::lock_guard<std::mutex> g(registry_mu_);
  return static_cast<int>(waiters_.size());
}

bool FakeClock::AwaitWaiters(int n, std::chrono::milliseconds real_timeout) {
  std::unique_lock<std::mutex> lock(registry_mu_);
  // A real wait is right here: this helper synchronises a test with real threads.
  return registry_cv_.wait_for(lock, real_timeout,
                               [&] { return static_cast<int>(waiters_.size()) >= n; });
}

}  // namespace gnomon::testing
