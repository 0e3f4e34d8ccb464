#include "src/exec/output_tail.h"

#include <algorithm>

namespace gnomon::exec_internal {

void OutputTail::Append(std::string_view data) {
  total_ += data.size();
  if (capacity_ == 0) return;
  if (data.size() >= capacity_) {
    // Only the last capacity_ bytes of this chunk survive: restart the ring with them.
    data.remove_prefix(data.size() - capacity_);
    ring_.assign(data);
    next_ = 0;
    return;
  }
  if (ring_.size() < capacity_) {
    const size_t fill = std::min(capacity_ - ring_.size(), data.size());
    ring_.append(data.substr(0, fill));
    data.remove_prefix(fill);
    if (data.empty()) return;
    next_ = 0;
  }
  // The ring is full: overwrite the oldest bytes, wrapping at most once (data < capacity_).
  const size_t first = std::min(capacity_ - next_, data.size());
  ring_.replace(next_, first, data.substr(0, first));
  data.remove_prefix(first);
  ring_.replace(0, data.size(), data);
  next_ = (next_ + first + data.size()) % capacity_;
}

std::string OutputTail::Contents() const {
  if (ring_.size() < capacity_ || next_ == 0) return ring_;
  std::string out;
  out.reserve(ring_.size());
  out.append(ring_, next_, std::string::npos);
  out.append(ring_, 0, next_);
  return out;
}

void LineSplitter::Feed(std::string_view data) {
  while (!data.empty()) {
    const size_t nl = data.find('\n');
    const std::string_view piece = data.substr(0, nl);
    if (!overlong_) {
      if (partial_.size() + piece.size() > max_line_) {
        overlong_ = true;
        partial_.clear();
        partial_.shrink_to_fit();
      } else if (nl != std::string_view::npos && partial_.empty()) {
        Emit(piece);  // the common case: a whole line in one chunk, no copy
      } else {
        partial_.append(piece);
        if (nl != std::string_view::npos) {
          Emit(partial_);
          partial_.clear();
        }
      }
    }
    if (nl == std::string_view::npos) return;
    overlong_ = false;
    data.remove_prefix(nl + 1);
  }
}

void LineSplitter::Finish() {
  if (!overlong_ && !partial_.empty()) Emit(partial_);
  partial_.clear();
  overlong_ = false;
}

void LineSplitter::Emit(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  on_line_(line);
}

bool ParseCheckpointLine(std::string_view line, std::string_view* value) {
  static constexpr std::string_view kMarker = "::gnomon-checkpoint ";
  if (!line.starts_with(kMarker)) return false;
  *value = line.substr(kMarker.size());
  return true;
}

}  // namespace gnomon::exec_internal
