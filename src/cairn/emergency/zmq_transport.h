// A PeerTransport over ZeroMQ, for jobs without MPI (a jax.distributed job),
// that only the job's own processes can use.
//
// Why ZeroMQ: it is a small, well-kept C library in Debian (libzmq3-dev)
// that moves whole messages between processes over TCP with no broker and no
// code generation; UCX aims at RDMA fabrics and gRPC brings a much larger
// stack, neither needed to copy files between hosts. Its CURVE mechanism
// (CurveZMQ: Curve25519 keys, libsodium) authenticates both ends of every
// connection and encrypts it; docs/PEER_TRANSPORT.md says why that and not
// a shared HMAC secret or TLS.
//
// What is trusted: the job's coordinator (Coordinator: jax.distributed's
// service, MPI, or the callback one) carries the public keys, so whoever can
// change what its all-gather returns can join the job (they can already
// give it wrong ranks and barriers). Secret keys never leave their process.
// The network is not trusted: anyone may connect, listen or send bytes.
//
// The handshake, step by step:
//   1. Every process makes its own CURVE keypair (zmq_curve_keypair) when
//      the transport is created: a new one per job and per process.
//   2. It binds a ZAP handler (inproc://zeromq.zap.01) in its ZeroMQ
//      context before any TCP socket exists, so that no connection is ever
//      accepted without it, then one ROUTER socket as a CURVE server with its
//      secret key, on an ephemeral port of the one address it advertises
//      (the host given, else this host's name resolved; a non-loopback
//      address first), never on every interface.
//   3. All processes all-gather "tcp://<ip>:<port>", their public key and
//      their host name through the coordinator. A loopback address in a job
//      that spans hosts is an error naming the process (pass the address).
//   4. A process sends to process d through one DEALER socket, a CURVE
//      client with its own keypair that requires d's public key from step 3
//      as the server's: a listener without d's secret key fails the
//      handshake, so nothing is sent to an impostor.
//   5. The receiving ROUTER's CURVE handshake proves that the client holds
//      the secret key of the public key it presents; the ZAP handler accepts
//      the connection only when that key is one of step 3's, and sets its
//      user id to that process's index. Any other client is refused before
//      it can send one message (counted, see ZmqCounters).
//   6. A message is two or three frames: {sender u32, tag u32} and the
//      payload (one frame, or SendFramed's two). The sender is the
//      connection's user id (step 5): a header naming another sender is
//      dropped and counted, as is a message in another framing.
//
// Bounds (no peer decides how much memory this process uses):
//   - ZMQ_MAXMSGSIZE (kMaxFrameBytes, every socket, from the handshake on): a
//     frame declaring more is refused before anything is allocated, and its
//     connection closed. Send refuses a frame over the limit with
//     InvalidArgument, so the largest message the transfers send (a 64 MiB
//     header, a 16 MiB piece) passes and a larger one fails loudly.
//   - A receiver thread moves messages into a PeerMailbox (peer_mailbox.h):
//     bounded per (sender, tag); for a (sender, tag) nobody Expects only the
//     first message is kept, the rest dropped and counted; the rest of an
//     exchange is dropped when its Expect ends. The sockets' small
//     high-water marks hold back senders while the receiver waits.
//
// Copies: a transfer piece goes out without a copy on the sender (its frame
// and its bytes are two parts of one message, the bytes handed to ZeroMQ
// with zmq_msg_init_data and freed by its I/O thread once sent), and the
// receiver checks and writes the bytes straight out of the message parts
// (ReceiveParts) instead of joining them into one buffer first.
//
// Unimplemented when cairn was built without ZeroMQ (-DCAIRN_WITH_ZMQ=OFF).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "cairn/coordinator.h"
#include "cairn/emergency/transport.h"

namespace cairn::emergency {

// The largest frame any process of the job sends or accepts.
inline constexpr size_t kMaxZmqFrameBytes = (size_t{64} << 20) + (size_t{64} << 10);

// Collective over `coordinator` (every process calls it). `host`: the
// address to bind and advertise ("" = this host's name, resolved).
Result<std::shared_ptr<PeerTransport>> NewZmqTransport(Coordinator& coordinator, const std::string& host = "",
                                                       Coordinator::Duration timeout = std::chrono::seconds(60));

bool ZmqTransportAvailable();

// What a ZeroMQ transport refused or dropped so far, and where it listens.
struct ZmqTransportCounters {
  std::string endpoint;                 // bound and advertised: tcp://<ip>:<port>
  uint64_t refused_connections = 0;     // step 5: keys that are not the job's
  uint64_t forged_senders = 0;          // step 6: a header naming another sender
  uint64_t malformed_messages = 0;      // step 6: not in the transport's framing
  uint64_t dropped_unexpected = 0;      // no receiver expected them
  uint64_t dropped_after_exchange = 0;  // left when their exchange ended
  uint64_t queued_bytes = 0;            // in the mailbox now
};
// InvalidArgument for a transport that is not a ZeroMQ one.
Result<ZmqTransportCounters> ZmqCounters(PeerTransport& transport);

}  // namespace cairn::emergency
