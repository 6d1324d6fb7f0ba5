// Result<T>: either a value of type T or a non-OK Status.
//
// Thread safety: a value type, like Status.
#pragma once

#include <cassert>
#include <optional>
#include <utility>

#include "cairn/status.h"

namespace cairn {

template <typename T>
class [[nodiscard]] Result {
 public:
  // REQUIRES: !status.ok(). An OK status without a value is a bug; it is
  // turned into an Internal error rather than an empty value.
  Result(Status status) : status_(std::move(status)) {  // NOLINT implicit
    if (status_.ok()) status_ = InternalError("Result constructed from OK status without a value");
  }
  Result(T value) : value_(std::move(value)) {}  // NOLINT implicit
  template <typename U,
            typename = std::enable_if_t<std::is_constructible_v<T, U&&> &&
                                        !std::is_same_v<std::decay_t<U>, Status> &&
                                        !std::is_same_v<std::decay_t<U>, Result<T>> &&
                                        !std::is_same_v<std::decay_t<U>, T>>>
  Result(U&& value) : value_(T(std::forward<U>(value))) {}  // NOLINT implicit

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  // REQUIRES: ok().
  T& value() & { assert(ok()); return *value_; }
  const T& value() const& { assert(ok()); return *value_; }
  T&& value() && { assert(ok()); return std::move(*value_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

// A Result equals a value when it holds an equal one; an error equals none.
template <typename T>
bool operator==(const Result<T>& result, const T& value) {
  return result.ok() && *result == value;
}

}  // namespace cairn

// `CAIRN_ASSIGN_OR_RETURN(auto x, Foo());` declares/assigns x from a Result,
// returning its status from the enclosing function on error.
#define CAIRN_ASSIGN_OR_RETURN(lhs, expr) \
  CAIRN_ASSIGN_OR_RETURN_IMPL_(CAIRN_STATUS_CONCAT_(cairn_result_, __LINE__), lhs, expr)
#define CAIRN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
