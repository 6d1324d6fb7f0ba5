#include "cairn/engine/testing/thread_coordinator.h"

namespace cairn::engine::testing {
namespace {

class GroupMember final : public Coordinator {
 public:
  GroupMember(ThreadGroup* group, int index) : group_(group), index_(index) {}
  int process_index() const override { return index_; }
  int process_count() const override { return group_->count(); }
  Status Barrier(std::string_view name, Duration timeout) override {
    return group_->Exchange(std::string(name), index_, "", timeout).status();
  }
  Result<std::vector<std::string>> AllGather(std::string_view name, std::string_view value,
                                             Duration timeout) override {
    return group_->Exchange(std::string(name), index_, std::string(value), timeout);
  }
  Result<std::string> Broadcast(std::string_view name, int root, std::string_view value,
                                Duration timeout) override {
    CAIRN_ASSIGN_OR_RETURN(auto all, group_->Exchange(std::string(name), index_, std::string(value), timeout));
    return all.at(root);
  }

 private:
  ThreadGroup* group_;
  int index_;
};

}  // namespace

ThreadGroup::ThreadGroup(int count) : count_(count) {
  for (int i = 0; i < count; ++i) members_.push_back(std::make_unique<GroupMember>(this, i));
}

Result<std::vector<std::string>> ThreadGroup::Exchange(const std::string& name, int index,
                                                       std::string value,
                                                       Coordinator::Duration timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  Round& r = rounds_[name];
  if (r.values.empty()) r.values.resize(count_);
  r.values[index] = std::move(value);
  ++r.arrived;
  cv_.notify_all();
  if (!cv_.wait_for(lock, timeout, [&] { return r.arrived == count_; })) {
    return UnavailableError("collective `" + name + "`: only " + std::to_string(r.arrived) + " of " +
                            std::to_string(count_) + " processes arrived in time");
  }
  std::vector<std::string> out = r.values;
  if (++r.left == count_) rounds_.erase(name);
  return out;
}

}  // namespace cairn::engine::testing

