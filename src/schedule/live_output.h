// LiveOutput: what running attempts print, published to the backend while they run
// (Coordinator::SaveLiveOutput), so that any node's API shows a run's output before it ends.
//
// Each attempt writes into its own Tail (the last kMaxOutputBytes). One publisher thread wakes
// every `interval` and saves each tail that changed since its last save, one call after another:
// the backend sees at most one write per running attempt per interval, none for an attempt that
// printed nothing new, and never more than one at a time from this node (a slow backend only
// makes the rounds longer). A failed save (lease lost, backend down) is dropped: the attempt's
// report carries its whole output anyway.
//
// Thread safety: thread-safe. Lock order: LiveOutput::mu_ before Tail::mu_; neither is held
// during a backend call.
#ifndef GNOMON_SRC_SCHEDULE_LIVE_OUTPUT_H_
#define GNOMON_SRC_SCHEDULE_LIVE_OUTPUT_H_

#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>

#include "gnomon/coordinator.h"
#include "gnomon/time.h"
#include "src/base/thread_annotations.h"

namespace gnomon::internal {

class LiveOutput {
 public:
  // The output of one attempt: the last kMaxOutputBytes appended. Thread-safe.
  class Tail {
   public:
    explicit Tail(gnomon::Claim claim) : claim_(std::move(claim)) {}
    void Append(std::string_view data) GNOMON_EXCLUDES(mu_);
    std::string Contents() const GNOMON_EXCLUDES(mu_);
    const gnomon::Claim& claim() const { return claim_; }

   private:
    friend class LiveOutput;
    // The contents if they changed since the last call (and marks them saved), else nullopt.
    std::optional<std::string> TakeChanged() GNOMON_EXCLUDES(mu_);

    const gnomon::Claim claim_;
    mutable Mutex mu_;
    std::string buf_ GNOMON_GUARDED_BY(mu_);  // its last kMaxOutputBytes are the contents
    bool changed_ GNOMON_GUARDED_BY(mu_) = false;
  };

  // `interval` 0 = nothing is published (tails still collect output).
  LiveOutput(Coordinator& coord, Clock& clock, Duration interval);
  ~LiveOutput();  // Stop()
  LiveOutput(const LiveOutput&) = delete;
  LiveOutput& operator=(const LiveOutput&) = delete;

  void Start();
  // Joins the publisher; tails still open are no longer published. Idempotent.
  void Stop();

  // A tail for the attempt of `claim`, published until Close.
  std::shared_ptr<Tail> Open(const gnomon::Claim& claim);
  void Close(const std::shared_ptr<Tail>& tail);

  // Publishing rounds completed so far (each ends with a wait of `interval`).
  uint64_t rounds();
  // For tests: blocks (really, up to `timeout`) until `n` rounds completed; whether they did.
  bool AwaitRounds(uint64_t n, std::chrono::milliseconds timeout);

 private:
  void Publish();

  Coordinator& coord_;
  Clock& clock_;
  const Duration interval_;
  Mutex mu_;
  std::condition_variable cv_;
  std::set<std::shared_ptr<Tail>> open_ GNOMON_GUARDED_BY(mu_);
  bool stop_ GNOMON_GUARDED_BY(mu_) = false;
  uint64_t rounds_ GNOMON_GUARDED_BY(mu_) = 0;
  std::jthread thread_;
};

}  // namespace gnomon::internal

#endif  // GNOMON_SRC_SCHEDULE_LIVE_OUTPUT_H_
