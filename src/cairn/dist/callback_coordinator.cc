// A Coordinator over a key-value store given as callbacks (coordinator.h
// describes the key names). Used by the Python package with jax.distributed's
// client; tests use an in-memory store.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "cairn/coordinator.h"
#include "cairn/dist/collective_util.h"

namespace cairn {
namespace {

using dist::DeadlineAfter;
using dist::FormatSeconds;
using dist::TimeLeft;

class CallbackCoordinator final : public Coordinator {
 public:
  CallbackCoordinator(int index, int count, CoordinatorCallbacks callbacks)
      : index_(index), count_(count), cb_(std::move(callbacks)) {
    if (count_ < 1 || index_ < 0 || index_ >= count_) {
      invalid_ = InvalidArgumentError("callback coordinator: process index " +
                                      std::to_string(index_) + " is not in [0, " +
                                      std::to_string(count_) + ")");
    } else if (!cb_.key_value_set || !cb_.blocking_key_value_get) {
      invalid_ = InvalidArgumentError(
          "callback coordinator: key_value_set and blocking_key_value_get are required");
    }
  }

  int process_index() const override { return index_; }
  int process_count() const override { return count_; }

  Status Barrier(std::string_view name, Duration timeout) override {
    CAIRN_RETURN_IF_ERROR(invalid_);
    const std::string base = NextBase(name);
    if (cb_.barrier) {
      return cb_.barrier(base, timeout)
          .Annotate("barrier `" + std::string(name) + "` (id `" + base + "`, timeout " +
                    FormatSeconds(timeout) + ")");
    }
    return Gather("barrier", name, base, "", timeout).status();
  }

  Result<std::vector<std::string>> AllGather(std::string_view name, std::string_view value,
                                             Duration timeout) override {
    CAIRN_RETURN_IF_ERROR(invalid_);
    return Gather("all-gather", name, NextBase(name), value, timeout);
  }

  Result<std::string> Broadcast(std::string_view name, int root, std::string_view value,
                                Duration timeout) override {
    CAIRN_RETURN_IF_ERROR(invalid_);
    const std::string what = "broadcast `" + std::string(name) + "` from process " +
                             std::to_string(root);
    if (root < 0 || root >= count_) {
      return InvalidArgumentError(what + ": root is not in [0, " + std::to_string(count_) + ")");
    }
    const std::string key = NextBase(name) + "/root";
    if (root == index_) {
      CAIRN_RETURN_IF_ERROR(cb_.key_value_set(key, value).Annotate(what + ": setting `" + key + "`"));
      return std::string(value);
    }
    Result<std::string> got = cb_.blocking_key_value_get(key, timeout);
    if (!got.ok()) return Missing(what, key, root, timeout, got.status());
    return got;
  }

 private:
  // "<prefix>/<name>/<k>" for the k-th collective named `name`.
  std::string NextBase(std::string_view name) {
    uint64_t k;
    {
      std::lock_guard<std::mutex> lock(mu_);
      k = counters_[std::string(name)]++;
    }
    return cb_.key_prefix + "/" + std::string(name) + "/" + std::to_string(k);
  }

  Result<std::vector<std::string>> Gather(std::string_view kind, std::string_view name,
                                          const std::string& base, std::string_view value,
                                          Duration timeout) {
    const std::string what = std::string(kind) + " `" + std::string(name) + "`";
    const auto deadline = DeadlineAfter(timeout);
    const std::string own_key = base + "/" + std::to_string(index_);
    CAIRN_RETURN_IF_ERROR(
        cb_.key_value_set(own_key, value).Annotate(what + ": setting `" + own_key + "`"));
    std::vector<std::string> out(count_);
    out[index_] = std::string(value);
    for (int i = 0; i < count_; ++i) {
      if (i == index_) continue;
      const std::string key = base + "/" + std::to_string(i);
      Result<std::string> got = cb_.blocking_key_value_get(key, TimeLeft(deadline));
      if (!got.ok()) return Missing(what, key, i, timeout, got.status());
      out[i] = std::move(got).value();
    }
    return out;
  }

  // The error for a key of process `from` that did not arrive. A store's
  // timeout becomes Unavailable (whatever code the store used); other
  // failures keep their code.
  static Status Missing(const std::string& what, const std::string& key, int from,
                        Duration timeout, const Status& cause) {
    const std::string msg = what + ": no message from process " + std::to_string(from) +
                            " (key `" + key + "`) within " + FormatSeconds(timeout) + ": " +
                            std::string(cause.message());
    if (cause.code() == StatusCode::kInvalidArgument || cause.code() == StatusCode::kInternal) {
      return Status(cause.code(), msg);
    }
    return UnavailableError(msg);
  }

  const int index_;
  const int count_;
  const CoordinatorCallbacks cb_;
  Status invalid_;
  std::mutex mu_;
  std::map<std::string, uint64_t, std::less<>> counters_;
};

}  // namespace

std::unique_ptr<Coordinator> NewCallbackCoordinator(int process_index, int process_count,
                                                    CoordinatorCallbacks callbacks) {
  return std::make_unique<CallbackCoordinator>(process_index, process_count,
                                               std::move(callbacks));
}

}  // namespace cairn
