#include "cairn/status.h"

#include <cerrno>
#include <cstring>

namespace cairn {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "OK";
    case StatusCode::kInvalidArgument: return "InvalidArgument";
    case StatusCode::kNotFound: return "NotFound";
    case StatusCode::kAlreadyExists: return "AlreadyExists";
    case StatusCode::kFailedPrecondition: return "FailedPrecondition";
    case StatusCode::kResourceExhausted: return "ResourceExhausted";
    case StatusCode::kUnavailable: return "Unavailable";
    case StatusCode::kDataLoss: return "DataLoss";
    case StatusCode::kInternal: return "Internal";
    case StatusCode::kUnimplemented: return "Unimplemented";
    case StatusCode::kCancelled: return "Cancelled";
  }
  return "Unknown";
}

Status::Status(StatusCode code, std::string message) {
  if (code != StatusCode::kOk) {
    state_ = std::make_unique<State>(State{code, std::move(message)});
  }
}

Status::Status(const Status& other)
    : state_(other.state_ ? std::make_unique<State>(*other.state_) : nullptr) {}

Status& Status::operator=(const Status& other) {
  if (this != &other) {
    state_ = other.state_ ? std::make_unique<State>(*other.state_) : nullptr;
  }
  return *this;
}

std::string_view Status::message() const {
  return state_ ? std::string_view(state_->message) : std::string_view();
}

std::string Status::ToString() const {
  if (ok()) return "OK";
  std::string s(StatusCodeName(state_->code));
  s += ": ";
  s += state_->message;
  return s;
}

Status Status::Annotate(std::string_view context) const {
  if (ok()) return Status();
  const std::string_view m = state_->message;
  if (!context.empty() && m.substr(0, context.size()) == context &&
      (m.size() == context.size() || m[context.size()] == ':')) {
    return *this;  // a lower layer already said exactly this
  }
  std::string msg(context);
  msg += ": ";
  msg += state_->message;
  return Status(state_->code, std::move(msg)).WithErrorNumber(state_->error_number);
}

Status Status::WithErrorNumber(int err) const {
  Status out(*this);
  if (out.state_) out.state_->error_number = err;
  return out;
}

Status InvalidArgumentError(std::string m) { return Status(StatusCode::kInvalidArgument, std::move(m)); }
Status NotFoundError(std::string m) { return Status(StatusCode::kNotFound, std::move(m)); }
Status AlreadyExistsError(std::string m) { return Status(StatusCode::kAlreadyExists, std::move(m)); }
Status FailedPreconditionError(std::string m) { return Status(StatusCode::kFailedPrecondition, std::move(m)); }
Status ResourceExhaustedError(std::string m) { return Status(StatusCode::kResourceExhausted, std::move(m)); }
Status UnavailableError(std::string m) { return Status(StatusCode::kUnavailable, std::move(m)); }
Status DataLossError(std::string m) { return Status(StatusCode::kDataLoss, std::move(m)); }
Status InternalError(std::string m) { return Status(StatusCode::kInternal, std::move(m)); }
Status UnimplementedError(std::string m) { return Status(StatusCode::kUnimplemented, std::move(m)); }

Status ErrnoError(int err, std::string_view what) {
  std::string msg(what);
  msg += ": ";
  msg += std::strerror(err);
  StatusCode code;
  switch (err) {
    case ENOENT: case ENOTDIR: code = StatusCode::kNotFound; break;
    case EEXIST: code = StatusCode::kAlreadyExists; break;
    case ENOSPC: case EDQUOT: case ENOMEM: case EMFILE: case ENFILE:
      code = StatusCode::kResourceExhausted; break;
    case EINVAL: case ENAMETOOLONG: case EISDIR: code = StatusCode::kInvalidArgument; break;
    case EACCES: case EPERM: case EROFS: code = StatusCode::kFailedPrecondition; break;
    default: code = StatusCode::kUnavailable; break;
  }
  return Status(code, std::move(msg)).WithErrorNumber(err);
}

}  // namespace cairn
