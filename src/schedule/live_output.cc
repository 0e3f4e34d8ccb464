#include "src/schedule/live_output.h"

#include <utility>
#include <vector>

namespace gnomon::internal {

void LiveOutput::Tail::Append(std::string_view data) {
  if (data.empty()) return;
  MutexLock lock(mu_);
  if (data.size() >= kMaxOutputBytes) {
    buf_.assign(data.substr(data.size() - kMaxOutputBytes));
  } else {
    buf_.append(data);
    // Trimmed in steps of kMaxOutputBytes, so each byte is moved at most once.
    if (buf_.size() >= 2 * kMaxOutputBytes) buf_.erase(0, buf_.size() - kMaxOutputBytes);
  }
  changed_ = true;
}

std::string LiveOutput::Tail::Contents() const {
  MutexLock lock(mu_);
  return buf_.size() > kMaxOutputBytes ? buf_.substr(buf_.size() - kMaxOutputBytes) : buf_;
}

std::optional<std::string> LiveOutput::Tail::TakeChanged() {
  MutexLock lock(mu_);
  if (!changed_) return std::nullopt;
  changed_ = false;
  return buf_.size() > kMaxOutputBytes ? buf_.substr(buf_.size() - kMaxOutputBytes) : buf_;
}

LiveOutput::LiveOutput(Coordinator& coord, Clock& clock, Duration interval)
    : coord_(coord), clock_(clock), interval_(interval) {}

LiveOutput::~LiveOutput() { Stop(); }

void LiveOutput::Start() {
  if (interval_ <= Duration::zero()) return;
  thread_ = std::jthread([this] { Publish(); });
}

void LiveOutput::Stop() {
  {
    MutexLock lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<LiveOutput::Tail> LiveOutput::Open(const gnomon::Claim& claim) {
  auto tail = std::make_shared<Tail>(claim);
  if (interval_ > Duration::zero()) {
    MutexLock lock(mu_);
    open_.insert(tail);
  }
  return tail;
}

void LiveOutput::Close(const std::shared_ptr<Tail>& tail) {
  MutexLock lock(mu_);
  open_.erase(tail);
}

void LiveOutput::Publish() {
  MutexLock lock(mu_);
  while (!stop_) {
    clock_.WaitFor(lock.native(), cv_, interval_, [&] {
      mu_.AssertHeld();
      return stop_;
    });
    if (stop_) return;
    std::vector<std::shared_ptr<Tail>> tails(open_.begin(), open_.end());
    lock.Unlock();
    for (const std::shared_ptr<Tail>& tail : tails) {
      if (std::optional<std::string> text = tail->TakeChanged()) {
        // A failure is dropped: the report carries the whole output (and a lost lease stops the
        // attempt through the scheduler's own renewals).
        static_cast<void>(coord_.SaveLiveOutput(tail->claim(), *text));
      }
    }
    lock.Lock();
    ++rounds_;
    cv_.notify_all();
  }
}

uint64_t LiveOutput::rounds() {
  MutexLock lock(mu_);
  return rounds_;
}

bool LiveOutput::AwaitRounds(uint64_t n, std::chrono::milliseconds timeout) {
  MutexLock lock(mu_);
  return cv_.wait_for(lock.native(), timeout, [&] {
    mu_.AssertHeld();
    return rounds_ >= n;
  });
}

}  // namespace gnomon::internal
