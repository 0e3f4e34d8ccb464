// Status and Result<T>: how every gnomon library call reports failure.
//
// Errors are values (docs/architecture.md rule 4). A Status carries one of a small fixed set of
// codes and a message that says what was wrong and where
// ("hour: 25 is out of range 0-23 (column 5)"). Result<T> holds either a T or a non-OK Status,
// shaped like std::expected<T, Status>.
// A broken invariant is a bug, not an error: GNOMON_CHECK aborts with a message.
#ifndef GNOMON_STATUS_H_
#define GNOMON_STATUS_H_

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace gnomon {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // the caller's input is wrong (bad expression, bad config, bad request)
  kNotFound,            // the named thing does not exist
  kAlreadyExists,       // a create found the thing already there
  kFailedPrecondition,  // the system is not in a state where this can be done (version mismatch)
  kUnavailable,         // a dependency (backend, network) could not be reached; may succeed later
  kDeadlineExceeded,    // the operation did not finish in time
  kLeaseLost,           // the caller no longer holds the claim it acted on (fenced off)
  kInternal,            // anything else; a message says what
};

// Returns the canonical name of `code`, e.g. "InvalidArgument".
std::string_view StatusCodeName(StatusCode code);

// An error code and message; default-constructed = OK. Cheap to copy when OK.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // "InvalidArgument: hour: 25 is out of range 0-23" or "OK".
  std::string ToString() const;

  // Returns a copy whose message is `prefix` + ": " + message (e.g. a file and line).
  Status WithPrefix(std::string_view prefix) const;

  friend bool operator==(const Status& a, const Status& b) {
    return a.code_ == b.code_ && a.message_ == b.message_;
  }

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

inline Status InvalidArgumentError(std::string m) {
  return {StatusCode::kInvalidArgument, std::move(m)};
}
inline Status NotFoundError(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
inline Status AlreadyExistsError(std::string m) {
  return {StatusCode::kAlreadyExists, std::move(m)};
}
inline Status FailedPreconditionError(std::string m) {
  return {StatusCode::kFailedPrecondition, std::move(m)};
}
inline Status UnavailableError(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
inline Status DeadlineExceededError(std::string m) {
  return {StatusCode::kDeadlineExceeded, std::move(m)};
}
inline Status LeaseLostError(std::string m) { return {StatusCode::kLeaseLost, std::move(m)}; }
inline Status InternalError(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

namespace internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* condition,
                              std::string_view message);
}  // namespace internal

// Either a value of type T or a non-OK Status. Accessing value() of an error is a bug (aborts).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (status_.ok()) internal::CheckFailed(__FILE__, __LINE__, "!status.ok()", "Result(OK)");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  const T& value() const& { return Get(); }
  T& value() & { return Get(); }
  T&& value() && { return std::move(Get()); }
  const T& operator*() const& { return Get(); }
  T& operator*() & { return Get(); }
  const T* operator->() const { return &Get(); }
  T* operator->() { return &Get(); }

 private:
  T& Get() {
    if (!value_) internal::CheckFailed(__FILE__, __LINE__, "ok()", status_.ToString());
    return *value_;
  }
  const T& Get() const {
    if (!value_) internal::CheckFailed(__FILE__, __LINE__, "ok()", status_.ToString());
    return *value_;
  }

  std::optional<T> value_;
  Status status_;
};

}  // namespace gnomon

// Aborts with file, line and the condition when `cond` is false: for invariants, never for input.
#define GNOMON_CHECK(cond)                                                       \
  do {                                                                           \
    if (!(cond)) ::gnomon::internal::CheckFailed(__FILE__, __LINE__, #cond, ""); \
  } while (false)

// Returns the Status of `expr` from the enclosing function when it is not OK.
#define GNOMON_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::gnomon::Status gnomon_status_ = (expr);        \
    if (!gnomon_status_.ok()) return gnomon_status_; \
  } while (false)

#endif  // GNOMON_STATUS_H_
