// Waiting real time in tests that start servers (header-only, tests only): a server starting or
// dying, a client's backoff. Scheduling tests never use it: they drive a FakeClock.
#ifndef GNOMON_SRC_TESTING_REAL_WAIT_H_
#define GNOMON_SRC_TESTING_REAL_WAIT_H_

#include <condition_variable>
#include <mutex>

#include "gnomon/time.h"

namespace gnomon::testing {

// Waits `d` of real time.
inline void RealWait(Duration d) {
  std::mutex mu;
  std::condition_variable cv;
  std::unique_lock<std::mutex> lock(mu);
  SystemClock::Get().WaitFor(lock, cv, d, [] { return false; });
}

}  // namespace gnomon::testing

#endif  // GNOMON_SRC_TESTING_REAL_WAIT_H_
