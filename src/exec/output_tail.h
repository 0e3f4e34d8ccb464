// Internal to gnomon_exec: bounded buffers for what a run prints.
#ifndef GNOMON_SRC_EXEC_OUTPUT_TAIL_H_
#define GNOMON_SRC_EXEC_OUTPUT_TAIL_H_

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace gnomon::exec_internal {

// Keeps the last `capacity` bytes appended, in a ring of at most `capacity` bytes (allocated on
// first use). Thread-compatible.
class OutputTail {
 public:
  explicit OutputTail(size_t capacity) : capacity_(capacity) {}

  void Append(std::string_view data);
  // The kept bytes, oldest first.
  std::string Contents() const;
  // Total bytes ever appended.
  size_t total_bytes() const { return total_; }

 private:
  size_t capacity_;
  std::string ring_;  // grows to capacity_, then wraps
  size_t next_ = 0;   // where the next byte goes once ring_ is full
  size_t total_ = 0;
};

// Splits a byte stream into lines and calls `on_line` for each complete line (without "\n" or a
// trailing "\r"), and for a final unterminated line on Finish(). Lines longer than `max_line`
// bytes are dropped (memory stays bounded). Thread-compatible.
class LineSplitter {
 public:
  LineSplitter(size_t max_line, std::function<void(std::string_view)> on_line)
      : max_line_(max_line), on_line_(std::move(on_line)) {}

  void Feed(std::string_view data);
  void Finish();

 private:
  void Emit(std::string_view line);

  size_t max_line_;
  std::function<void(std::string_view)> on_line_;
  std::string partial_;
  bool overlong_ = false;  // the current line exceeded max_line_: skip to its end
};

// The value of a checkpoint line ("::gnomon-checkpoint <value>"), or false if `line` is not one.
bool ParseCheckpointLine(std::string_view line, std::string_view* value);

}  // namespace gnomon::exec_internal

#endif  // GNOMON_SRC_EXEC_OUTPUT_TAIL_H_
