// The only place that reads the machine's clocks and really waits (docs/architecture.md rule 2).
#include <chrono>

#include "gnomon/time.h"

namespace gnomon {

SystemClock& SystemClock::Get() {
  static SystemClock* const clock = new SystemClock();
  return *clock;
}

Instant SystemClock::Now() const {
  return Instant::FromUnixMillis(std::chrono::duration_cast<std::chrono::milliseconds>(
                                     std::chrono::system_clock::now().time_since_epoch())
                                     .count());
}

Duration SystemClock::SteadyNow() const {
  return std::chrono::duration_cast<Duration>(std::chrono::steady_clock::now().time_since_epoch());
}

bool SystemClock::WaitUntil(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                            Instant deadline, const std::function<bool()>& ready) {
  // Waits on the realtime clock so that an NTP step moves the wake-up with the wall clock. Each
  // slice is capped so that a step is noticed within a second even if the library waits on a
  // monotonic clock underneath.
  while (!ready()) {
    const Instant now = Now();
    if (now >= deadline) return false;
    const Duration slice = std::min<Duration>(deadline - now, std::chrono::seconds(1));
    cv.wait_for(lock, slice);
  }
  return true;
}

bool SystemClock::WaitUntilSteady(std::unique_lock<std::mutex>& lock, std::condition_variable& cv,
                                  Duration steady_deadline, const std::function<bool()>& ready) {
  // Waits in slices of at most a day: a "forever" deadline (Duration::max()) must not overflow
  // the nanosecond arithmetic of the standard library.
  while (!ready()) {
    const Duration now = SteadyNow();
    if (now >= steady_deadline) return false;
    const Duration slice = std::min<Duration>(steady_deadline - now, std::chrono::hours(24));
    cv.wait_for(lock, slice);
  }
  return true;
}

}  // namespace gnomon
