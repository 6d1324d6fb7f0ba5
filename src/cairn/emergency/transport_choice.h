// Which peer transport an emergency manager uses, picked from the caller's
// settings and the job's environment (every front end picks alike):
//
//   1. A transport the caller names ("mpi", "zmq", "none") is used.
//   2. Else, in a job of several processes: MPI when the job was started by
//      mpirun with exactly the coordinator's processes (OMPI_COMM_WORLD_SIZE
//      or PMI_SIZE); else ZeroMQ when cairn was built with it; else none.
//   3. Peer copies not given: one when there is a transport and more than
//      one replica, else none. Peer copies without a transport are refused.
//
// Thread safety: pure functions (DetectTransportEnvironment reads the
// environment).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "cairn/coordinator.h"
#include "cairn/emergency/transport.h"
#include "cairn/result.h"

namespace cairn::emergency {

enum class TransportKind { kNone, kMpi, kZmq };

std::string_view TransportName(TransportKind kind);

struct TransportChoice {
  TransportKind kind = TransportKind::kNone;
  int peer_copies = 0;
};

// The facts the choice depends on, from the environment and the build.
struct TransportEnvironment {
  int process_count = 1;    // the coordinator's
  int mpi_world_size = 1;   // dist::MpiWorldSizeFromEnv()
  bool zmq_available = false;
};

// `requested`: "" (pick), "mpi", "zmq" or "none"; `peer_copies`: nullopt
// (pick). InvalidArgument for another transport name, negative peer copies,
// or peer copies without a transport.
Result<TransportChoice> ChooseTransport(std::string_view requested, std::optional<int> peer_copies,
                                        int num_replicas, const TransportEnvironment& env);

// The environment of a job coordinated by `coordinator`.
TransportEnvironment DetectTransportEnvironment(const Coordinator& coordinator);

// Opens the chosen transport (null for kNone). The ZeroMQ transport listens
// on `zmq_host` ("" : this host's name resolved) and exchanges its keys
// through `coordinator` within `timeout`.
Result<std::shared_ptr<PeerTransport>> OpenTransport(TransportKind kind, Coordinator& coordinator,
                                                     const std::string& zmq_host, Coordinator::Duration timeout);

}  // namespace cairn::emergency
