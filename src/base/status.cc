#include "gnomon/status.h"

#include <cstdio>
#include <cstdlib>

namespace gnomon {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return "OK";
    case StatusCode::kInvalidArgument:
      return "InvalidArgument";
    case StatusCode::kNotFound:
      return "NotFound";
    case StatusCode::kAlreadyExists:
      return "AlreadyExists";
    case StatusCode::kFailedPrecondition:
      return "FailedPrecondition";
    case StatusCode::kUnavailable:
      return "Unavailable";
    case StatusCode::kDeadlineExceeded:
      return "DeadlineExceeded";
    case StatusCode::kLeaseLost:
      return "LeaseLost";
    case StatusCode::kInternal:
      return "Internal";
  }
  return "Unknown";
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string out(StatusCodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

Status Status::WithPrefix(std::string_view prefix) const {
  if (ok()) return *this;
  std::string m(prefix);
  m += ": ";
  m += message_;
  return {code_, std::move(m)};
}

namespace internal {
void CheckFailed(const char* file, int line, const char* condition, std::string_view message) {
  std::fprintf(stderr, "%s:%d: GNOMON_CHECK failed: %s %.*s\n", file, line, condition,
               static_cast<int>(message.size()), message.data());
  std::abort();
}
}  // namespace internal

}  // namespace gnomon
