// A PeerTransport over ZeroMQ, for jobs without MPI (a jax.distributed job):
// the endpoints are exchanged through the job's coordinator.
//
// Why ZeroMQ: it is a small, well-kept C library in Debian (libzmq3-dev)
// that moves whole messages between processes over TCP with no broker and no
// code generation; UCX aims at RDMA fabrics and gRPC brings a much larger
// stack, neither needed to copy files between hosts.
//
// How: every process binds one ROUTER socket on an ephemeral TCP port (no
// fixed port) and all-gathers "tcp://<host>:<port>" through the coordinator.
// A message to process d goes through this process's DEALER socket connected
// to d's ROUTER (one per destination, used under a lock, so messages to one
// destination keep their order) as two frames: {sender u32, tag u32} and the
// payload. A receiver thread moves arriving messages into per-(sender, tag)
// queues; while they hold more than kMaxQueuedBytes it stops reading, and
// the sockets' small high-water marks then hold the senders back.
//
// Unimplemented when cairn was built without ZeroMQ.
#pragma once

#include <memory>
#include <string>

#include "cairn/coordinator.h"
#include "cairn/emergency/transport.h"

namespace cairn::emergency {

// Collective over `coordinator` (every process calls it). `host`: the
// address other processes reach this one at ("" = this host's name).
Result<std::shared_ptr<PeerTransport>> NewZmqTransport(Coordinator& coordinator, const std::string& host = "",
                                                       Coordinator::Duration timeout = std::chrono::seconds(60));

bool ZmqTransportAvailable();

}  // namespace cairn::emergency
