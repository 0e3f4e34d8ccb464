// The out-of-line default of DefinitionStore (include/gnomon/definition_store.h): WaitJobsChange
// polls on the machine's clock, so the public header itself reads no clock.
#include <algorithm>
#include <condition_variable>
#include <mutex>

#include "gnomon/definition_store.h"

namespace gnomon {

Result<int64_t> DefinitionStore::WaitJobsChange(int64_t since, Duration timeout) {
  SystemClock& clock = SystemClock::Get();
  const Duration deadline = clock.SteadyNow() + timeout;
  std::mutex mu;
  std::condition_variable never;
  std::unique_lock<std::mutex> lock(mu);
  while (true) {
    Result<int64_t> v = JobsVersion();
    if (!v.ok() || *v != since) return v;
    const Duration left = deadline - clock.SteadyNow();
    if (left <= Duration::zero()) return v;
    clock.WaitFor(lock, never, std::min<Duration>(left, std::chrono::milliseconds(100)),
                  [] { return false; });
  }
}

}  // namespace gnomon
