// Test-only coordinators: N threads of one test standing in for N processes.
//
// ThreadGroup holds the shared state; ThreadGroup::Member(i) is process i's
// Coordinator. Collectives are matched by name; a collective whose peers do
// not all arrive within the timeout returns Unavailable.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "cairn/coordinator.h"

namespace cairn::engine::testing {

class ThreadGroup {
 public:
  explicit ThreadGroup(int count);
  Coordinator& Member(int index) { return *members_[index]; }
  int count() const { return count_; }

  // Every member's contribution to collective `name`, once all arrived.
  Result<std::vector<std::string>> Exchange(const std::string& name, int index, std::string value,
                                            Coordinator::Duration timeout);

 private:
  struct Round {
    std::vector<std::string> values;
    int arrived = 0;
    int left = 0;
  };
  int count_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, Round> rounds_;
  std::vector<std::unique_ptr<Coordinator>> members_;
};

}  // namespace cairn::engine::testing
