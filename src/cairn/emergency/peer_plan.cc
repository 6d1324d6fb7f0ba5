#include "cairn/emergency/peer_plan.h"

#include <algorithm>
#include <string>

namespace cairn::emergency {

Status CheckLayout(const ReplicaLayout& layout, int copies) {
  const int n = layout.process_count, r = layout.num_replicas;
  if (n < 1 || r < 1 || r > n || n % r != 0) {
    return InvalidArgumentError("emergency checkpointing: " + std::to_string(n) +
                                " processes cannot form " + std::to_string(r) +
                                " equal data-parallel replicas");
  }
  if (copies < 0 || copies > n - 1) {
    return InvalidArgumentError("emergency checkpointing: " + std::to_string(copies) +
                                " peer copies asked for in a job of " + std::to_string(n) +
                                " processes (at most " + std::to_string(n - 1) + ")");
  }
  return Status::OK();
}

int PeerOf(const ReplicaLayout& layout, int process, int k) {
  const int n = layout.process_count, r = layout.num_replicas;
  if (r == 1) return (process + k) % n;
  if (k % r == 0) return (process + k) % n;  // more copies than other replicas: next processes
  const int ppr = layout.processes_per_replica();
  return ((layout.ReplicaOf(process) + k) % r) * ppr + layout.SlotOf(process);
}

int SourceOf(const ReplicaLayout& layout, int process, int k) {
  const int n = layout.process_count, r = layout.num_replicas;
  if (r == 1 || k % r == 0) return ((process - k) % n + n) % n;
  const int ppr = layout.processes_per_replica();
  return ((layout.ReplicaOf(process) - k % r + r) % r) * ppr + layout.SlotOf(process);
}

namespace {
std::vector<int> Distinct(const ReplicaLayout& layout, int process, int copies, bool peers) {
  std::vector<int> out;
  for (int k = 1; k <= copies; ++k) {
    const int q = peers ? PeerOf(layout, process, k) : SourceOf(layout, process, k);
    if (q != process && std::find(out.begin(), out.end(), q) == out.end()) out.push_back(q);
  }
  return out;
}
}  // namespace

std::vector<int> PeersOf(const ReplicaLayout& layout, int process, int copies) {
  return Distinct(layout, process, copies, true);
}

std::vector<int> SourcesOf(const ReplicaLayout& layout, int process, int copies) {
  return Distinct(layout, process, copies, false);
}

}  // namespace cairn::emergency
