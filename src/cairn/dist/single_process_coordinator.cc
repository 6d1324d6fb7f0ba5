// The coordinator of a one-process job: every collective completes at once.
#include <memory>
#include <string>
#include <vector>

#include "cairn/coordinator.h"

namespace cairn {
namespace {

class SingleProcessCoordinator final : public Coordinator {
 public:
  int process_index() const override { return 0; }
  int process_count() const override { return 1; }

  Status Barrier(std::string_view name, Duration timeout) override { return Status::OK(); }

  Result<std::vector<std::string>> AllGather(std::string_view name, std::string_view value,
                                             Duration timeout) override {
    return std::vector<std::string>{std::string(value)};
  }

  Result<std::string> Broadcast(std::string_view name, int root, std::string_view value,
                                Duration timeout) override {
    if (root != 0) {
      return InvalidArgumentError("broadcast `" + std::string(name) + "`: root " +
                                  std::to_string(root) + " is not a process of a one-process job");
    }
    return std::string(value);
  }
};

}  // namespace

std::unique_ptr<Coordinator> NewSingleProcessCoordinator() {
  return std::make_unique<SingleProcessCoordinator>();
}

}  // namespace cairn
