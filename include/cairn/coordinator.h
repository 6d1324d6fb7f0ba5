// Coordinator: how the processes of one job agree.
//
// cairn's engine and emergency manager run in every process of a job. They
// need four things from the job's runtime: who am I (process_index), how many
// are we (process_count), wait for everyone (Barrier), and exchange small
// messages (AllGather, Broadcast). A Coordinator provides them; cairn ships
// three (src/cairn/dist/): single-process, MPI, and a callback adapter through
// which the Python package plugs in jax.distributed's key-value client.
//
// Contract:
//   - Every process calls the same collectives in the same order, with the same
//     `name`. `name` identifies the collective across processes ("cairn/save/
//     <path>/commit"); a coordinator may use it as a key prefix, so it must be
//     unique for the lifetime of the job among concurrent collectives.
//   - A collective returns `Unavailable` if the other
//     processes do not arrive within `timeout`; it never blocks forever.
//   - Messages are small (metadata, statuses, offsets): at most a few MiB.
//   - Methods are thread-safe, but collectives with different names issued
//     concurrently from different threads are only allowed where the
//     implementation says so.
//
// Thread safety: see above. Ownership: the caller owns the Coordinator and
// keeps it alive for as long as any engine operation that uses it.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/result.h"
#include "cairn/status.h"

namespace cairn {

class Coordinator {
 public:
  using Duration = std::chrono::nanoseconds;

  virtual ~Coordinator() = default;

  virtual int process_index() const = 0;
  virtual int process_count() const = 0;
  bool is_primary() const { return process_index() == 0; }

  // Returns once every process has called Barrier(name).
  virtual Status Barrier(std::string_view name, Duration timeout) = 0;

  // Every process contributes `value`; every process receives all values,
  // ordered by process index.
  virtual Result<std::vector<std::string>> AllGather(std::string_view name,
                                                     std::string_view value,
                                                     Duration timeout) = 0;

  // Process `root` contributes `value`; every process receives it (the value
  // passed by the other processes is ignored).
  virtual Result<std::string> Broadcast(std::string_view name, int root,
                                        std::string_view value,
                                        Duration timeout) = 0;
};

// Every process reports its own Status; every process receives the same
// answer: OK if all were OK, otherwise the first failure by process index,
// annotated with the index of the process where it happened. Used after each
// phase of a save so that one failing process fails the save everywhere.
Status AgreeOnStatus(Coordinator& coordinator, std::string_view name,
                     const Status& local, Coordinator::Duration timeout);

// A coordinator for a job of one process: collectives return at once.
// Broadcast accepts only root 0.
std::unique_ptr<Coordinator> NewSingleProcessCoordinator();

// What a job's own runtime must provide for NewCallbackCoordinator: a
// key-value store shared by all processes (jax.distributed's client offers
// exactly this: key_value_set_bytes, blocking_key_value_get_bytes and
// wait_at_barrier).
//
// The callbacks are called from whichever thread runs a collective, possibly
// several threads at once (collectives with different names), so they must
// be thread-safe. A callback reports failure through its Status; a
// `blocking_key_value_get` that runs out of time returns Unavailable.
struct CoordinatorCallbacks {
  // Stores `value` under `key`. Every key is set exactly once in a job.
  std::function<Status(std::string_view key, std::string_view value)> key_value_set;
  // Waits until `key` is set by some process (at most `timeout`) and returns
  // its value.
  std::function<Result<std::string>(std::string_view key, Coordinator::Duration timeout)>
      blocking_key_value_get;
  // Optional. Returns once every process has called it with the same `id`.
  // Without it, Barrier is an AllGather of empty values.
  std::function<Status(std::string_view id, Coordinator::Duration timeout)> barrier;
  // Prefix of every key and barrier id this coordinator uses. Two callback
  // coordinators over the same store must have different prefixes.
  std::string key_prefix = "cairn";
};

// A coordinator on top of a key-value store (see CoordinatorCallbacks).
//
// Keys: the k-th collective (k = 0, 1, ...) called with name N writes
// "<key_prefix>/<N>/<k>/<process index>" (AllGather, Barrier without a barrier
// callback) or "<key_prefix>/<N>/<k>/root" (Broadcast); barrier ids are
// "<key_prefix>/<N>/<k>". The counter k makes the keys unique even when a job
// reuses a name (every process calls the same collectives in the same order,
// so every process counts alike). Keys are never deleted: each costs the
// store one small value.
//
// Timeouts: a collective has one deadline; every blocking get receives the
// time left until it, and the Unavailable error names the process whose key
// did not arrive.
//
// Concurrency: collectives with different names may run concurrently from
// different threads.
//
// REQUIRES: 0 <= process_index < process_count; key_value_set and
// blocking_key_value_get are set. Violations are reported by every collective
// as InvalidArgument.
std::unique_ptr<Coordinator> NewCallbackCoordinator(int process_index, int process_count,
                                                    CoordinatorCallbacks callbacks);

}  // namespace cairn
