// Status: the outcome of an operation that can fail.
//
// cairn's library code never throws. Every fallible function returns a
// `Status` or a `Result<T>` (result.h). An OK status is a null pointer, so
// success costs nothing; an error carries one of a small, fixed set of codes
// and a message that says what failed and where ("reading key `w/c/0/1` of
// file:///ckpt/7/: crc32c mismatch").
//
// Thread safety: a Status is a value; distinct objects may be used from
// distinct threads without synchronization.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace cairn {

// The codes. Persisted nowhere, but mapped to Python exceptions in one table
// (python/src/status_translation.cc): keep the set small.
enum class StatusCode : int {
  kOk = 0,
  kInvalidArgument = 1,   // bad user input, spec or metadata
  kNotFound = 2,          // the thing asked for does not exist
  kAlreadyExists = 3,     // a conditional create found something there
  kFailedPrecondition = 4,
  kResourceExhausted = 5, // out of space, over a memory budget
  kUnavailable = 6,       // transient storage error
  kDataLoss = 7,          // corrupt or truncated stored bytes
  kInternal = 8,          // a bug in cairn
  kUnimplemented = 9,     // a valid but unsupported feature
  kCancelled = 10,        // stopped by an Interrupt (interrupt.h): Ctrl-C, SIGTERM
};

std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // OK
  Status(StatusCode code, std::string message);
  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status OK() { return Status(); }

  bool ok() const { return state_ == nullptr; }
  StatusCode code() const { return state_ ? state_->code : StatusCode::kOk; }
  // The message without the code name; empty for OK.
  std::string_view message() const;
  // The errno of the system call the error came from (ErrnoError), kept
  // through Annotate; 0 when it did not come from one. The Python package
  // raises the OSError subclass Python raises for it (PermissionError, ...).
  int error_number() const { return state_ ? state_->error_number : 0; }
  // A copy carrying `err` as its error_number(). OK stays OK.
  Status WithErrorNumber(int err) const;
  // "DataLoss: <message>", or "OK".
  std::string ToString() const;

  // Returns a copy whose message is "<context>: <message>". OK stays OK.
  // Used once at each layer boundary to say where an error happened. A
  // message that already begins with `<context>:` (a lower layer named the
  // same place, e.g. the key and URL of a read) is returned unchanged.
  Status Annotate(std::string_view context) const;

  // Explicitly discards a status (for best-effort cleanup paths).
  void IgnoreError() const {}

 private:
  struct State {
    StatusCode code;
    std::string message;
    int error_number = 0;
  };
  std::unique_ptr<State> state_;
};

// Named constructors.
Status InvalidArgumentError(std::string message);
Status NotFoundError(std::string message);
Status AlreadyExistsError(std::string message);
Status FailedPreconditionError(std::string message);
Status ResourceExhaustedError(std::string message);
Status UnavailableError(std::string message);
Status DataLossError(std::string message);
Status InternalError(std::string message);
Status UnimplementedError(std::string message);

// An error from errno, mapped to the closest code (ENOENT -> NotFound,
// ENOSPC -> ResourceExhausted, EIO -> Unavailable, ...).
Status ErrnoError(int err, std::string_view what);

}  // namespace cairn

#define CAIRN_STATUS_CONCAT_INNER_(a, b) a##b
#define CAIRN_STATUS_CONCAT_(a, b) CAIRN_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define CAIRN_RETURN_IF_ERROR(expr)                                   \
  do {                                                                \
    ::cairn::Status cairn_status_ = (expr);                           \
    if (!cairn_status_.ok()) return cairn_status_;                    \
  } while (0)
