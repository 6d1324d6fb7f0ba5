#include "cairn/emergency/transport_choice.h"

#include <string>

#include "cairn/dist/mpi_environment.h"
#include "cairn/emergency/mpi_transport.h"
#include "cairn/emergency/zmq_transport.h"

namespace cairn::emergency {

std::string_view TransportName(TransportKind kind) {
  switch (kind) {
    case TransportKind::kMpi:
      return "mpi";
    case TransportKind::kZmq:
      return "zmq";
    case TransportKind::kNone:
      break;
  }
  return "none";
}

Result<TransportChoice> ChooseTransport(std::string_view requested, std::optional<int> peer_copies,
                                        int num_replicas, const TransportEnvironment& env) {
  TransportChoice c;
  if (requested == "mpi") {
    c.kind = TransportKind::kMpi;
  } else if (requested == "zmq") {
    c.kind = TransportKind::kZmq;
  } else if (requested == "none") {
    c.kind = TransportKind::kNone;
  } else if (!requested.empty()) {
    return InvalidArgumentError("transport must be 'mpi', 'zmq' or 'none', not '" + std::string(requested) + "'");
  } else if (env.process_count > 1 && env.mpi_world_size == env.process_count) {
    c.kind = TransportKind::kMpi;
  } else if (env.process_count > 1 && env.zmq_available) {
    c.kind = TransportKind::kZmq;
  }
  if (!peer_copies) {
    c.peer_copies = c.kind != TransportKind::kNone && num_replicas > 1 ? 1 : 0;
  } else if (*peer_copies < 0) {
    return InvalidArgumentError("peer copies must be 0 or more, not " + std::to_string(*peer_copies));
  } else {
    c.peer_copies = *peer_copies;
  }
  if (c.peer_copies > 0 && c.kind == TransportKind::kNone) {
    return InvalidArgumentError(std::to_string(c.peer_copies) +
                                " peer copies need a transport ('mpi' under mpirun, 'zmq' otherwise)");
  }
  return c;
}

TransportEnvironment DetectTransportEnvironment(const Coordinator& coordinator) {
  TransportEnvironment env;
  env.process_count = coordinator.process_count();
  env.mpi_world_size = dist::MpiWorldSizeFromEnv();
  env.zmq_available = ZmqTransportAvailable();
  return env;
}

Result<std::shared_ptr<PeerTransport>> OpenTransport(TransportKind kind, Coordinator& coordinator,
                                                     const std::string& zmq_host, Coordinator::Duration timeout) {
  switch (kind) {
    case TransportKind::kMpi:
      return NewMpiTransport();
    case TransportKind::kZmq:
      return NewZmqTransport(coordinator, zmq_host, timeout);
    case TransportKind::kNone:
      break;
  }
  return std::shared_ptr<PeerTransport>();
}

}  // namespace cairn::emergency
