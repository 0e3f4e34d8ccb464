#include "src/schedule/live_output.h"

#include <utility>
#include <vector>

namespace gnomon::internal {

void LiveOutput::Tail::Append(std::string_view data) {
  if (data.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
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
  std::lock_guard<std::mutex> lock(mu_);
  return buf_.size() > kMaxOutputBytes ? buf_.substr(buf_.size() - kMaxOutputBytes) : buf_;
}

std::optional<std::string> LiveOutput::Tail::TakeChanged() {
  std::lock_guard<std::mutex> lock(mu_);
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
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::shared_ptr<LiveOutput::Tail> LiveOutput::Open(const gnomon::Claim& claim) {
  auto tail = std::make_shared<Tail>(claim);
  if (interval_ > Duration::zero()) {
    std::lock_guard<std::mutex> lock(mu_);
    open_.insert(tail);
  }
  return tail;
}

void LiveOutput::Close(const std::shared_ptr<Tail>& tail) {
  std::lock_guard<std::mutex> lock(mu_);
  open_.erase(tail);
}

void LiveOutput::Publish() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    clock_.WaitFor(lock, cv_, interval_, [&] { return stop_; });
    if (stop_) return;
    std::vector<std::shared_ptr<Tail>> tails(open_.begin(), open_.end());
    lock.unlock();
    for (const std::shared_ptr<Tail>& tail : tails) {
      if (std::optional<std::string> text = tail->TakeChanged()) {
        // A failure is dropped: the report carries the whole output (and a lost lease stops the
        // attempt through the scheduler's own renewals).
        static_cast<void>(coord_.SaveLiveOutput(tail->claim(), *text));
      }
    }
    lock.lock();
    ++rounds_;
    cv_.notify_all();
  }
}

uint64_t LiveOutput::rounds() {
  std::lock_guard<std::mutex> lock(mu_);
  return rounds_;
}

bool LiveOutput::AwaitRounds(uint64_t n, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, timeout, [&] { return rounds_ >= n; });
}

}  // namespace gnomon::internal
