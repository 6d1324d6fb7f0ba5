// Which processes hold copies of whose local checkpoints.
//
// A job of N processes runs R data-parallel replicas; processes are split
// into replicas contiguously (replica r = processes r*N/R .. (r+1)*N/R - 1,
// as Orbax takes replicas along the first axis of the global mesh), and
// process p's *slot* is its index inside its replica. Processes with the
// same slot in different replicas hold the same shards.
//
// Copy k (1 <= k <= copies) of process p's local step goes to the process
// with the same slot in replica (r + k) mod R: always another replica, so
// losing one host leaves its step on a host of another replica, and losing
// one host per replica leaves every step somewhere while copies = R - 1.
// With R = 1 there is no other replica: copies go to the next processes
// (p + k) mod N of the one replica.
//
// Thread safety: pure functions.
#pragma once

#include <vector>

#include "cairn/result.h"

namespace cairn::emergency {

struct ReplicaLayout {
  int process_count = 1;
  int num_replicas = 1;

  int processes_per_replica() const { return process_count / num_replicas; }
  int ReplicaOf(int process) const { return process / processes_per_replica(); }
  int SlotOf(int process) const { return process % processes_per_replica(); }
};

// InvalidArgument unless 1 <= num_replicas <= process_count and
// num_replicas divides process_count; copies must be in [0, N - 1].
Status CheckLayout(const ReplicaLayout& layout, int copies);

// The process that keeps copy `k` (1-based) of `process`'s local steps.
int PeerOf(const ReplicaLayout& layout, int process, int k);

// The process whose local steps `process` keeps as copy `k` (the inverse
// of PeerOf: PeerOf(SourceOf(p, k), k) == p).
int SourceOf(const ReplicaLayout& layout, int process, int k);

// Distinct peers of `process` for copies 1..copies (a peer is never the
// process itself; fewer than `copies` when the job is too small).
std::vector<int> PeersOf(const ReplicaLayout& layout, int process, int copies);
std::vector<int> SourcesOf(const ReplicaLayout& layout, int process, int copies);

}  // namespace cairn::emergency
