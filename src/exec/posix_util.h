// Internal to gnomon_exec: small POSIX helpers (file descriptors, errno and signal names).
#ifndef GNOMON_SRC_EXEC_POSIX_UTIL_H_
#define GNOMON_SRC_EXEC_POSIX_UTIL_H_

#include <string>
#include <utility>

namespace gnomon::exec_internal {

// Owns one file descriptor; closes it on destruction. Move-only. Thread-compatible.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) Reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Closes the current descriptor (if any) and takes `fd`.
  void Reset(int fd = -1);

 private:
  int fd_ = -1;
};

// strerror(err), thread-safe: "No such file or directory".
std::string ErrnoText(int err);
// "SIGTERM" for 15; "signal 99" for unknown numbers.
std::string SignalName(int sig);

}  // namespace gnomon::exec_internal

#endif  // GNOMON_SRC_EXEC_POSIX_UTIL_H_
