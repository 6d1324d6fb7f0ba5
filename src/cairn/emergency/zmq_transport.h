// A PeerTransport over ZeroMQ, for jobs without MPI (a jax.distributed job),
// whose messages only the job's own processes can read or write.
//
// Why ZeroMQ: it is a small, well-kept C library in Debian (libzmq3-dev)
// that moves whole messages between processes over TCP with no broker and no
// code generation; UCX aims at RDMA fabrics and gRPC brings a much larger
// stack, neither needed to copy files between hosts. Every message is
// sealed (peer_seal.h: X25519 pair keys, AES-256-GCM) instead of using
// libzmq's CURVE, which moved bulk data about 8x slower on 2 cores;
// docs/PEER_TRANSPORT.md says why, and why not a shared secret or TLS.
//
// What is trusted: the job's coordinator (Coordinator: jax.distributed's
// service, MPI, or the callback one) carries the public keys, so whoever can
// change what its all-gather returns can join the job (they can already
// give it wrong ranks and barriers). Secret keys never leave their process.
// The network is not trusted: anyone may connect, listen or send bytes.
//
// The handshake, step by step:
//   1. Every process makes its own X25519 keypair (peer_seal::NewKeyPair)
//      when the transport is created: a new one per job and per process.
//   2. It binds one ROUTER socket on an ephemeral port of the one address
//      it advertises (the host given, else this host's name resolved; a
//      non-loopback address first), never on every interface.
//   3. All processes all-gather "tcp://<ip>:<port>", their public key and
//      their host name through the coordinator. A loopback address in a job
//      that spans hosts is an error naming the process (pass the address).
//   4. Each process derives, for every process of the job, the pair's two
//      direction keys (peer_seal::DerivePairKeys); nobody else can. It sends
//      to process d through one DEALER socket connected to d's endpoint.
//   5. Every message is sealed under the sender->receiver key, numbered
//      1, 2, 3, ... per receiver (taken and sent under one lock, so they
//      arrive in order): {sender u32, tag u32, counter u64, header tag,
//      payload tag} as the header frame, then the payload (one frame, or
//      SendFramed's two), encrypted in place.
//   6. The receiver opens a message with the key of the sender its header
//      names, the header's tag first (a few dozen bytes: a forged message
//      costs no decryption of its payload): a message that fails (an
//      outsider's, a member's naming
//      another process, anything altered or cut on the way) is dropped and
//      counted, as is one whose counter is not above the last opened from
//      that sender (a replay) or one in another framing. Only then does it
//      reach the mailbox. A listener that took d's port gets nothing it can
//      read, and nothing it sends is taken as anyone's.
//
// Bounds (no peer decides how much memory this process uses):
//   - ZMQ_MAXMSGSIZE (kMaxFrameBytes, every socket, from the connection's
//     first frame on): a frame declaring more is refused before anything is
//     allocated, and its connection closed. Send refuses a frame over the
//     limit with InvalidArgument, so the largest message the transfers send
//     (a 64 MiB header, a 16 MiB piece) passes and a larger one fails
//     loudly.
//   - A receiver thread opens messages into a PeerMailbox (peer_mailbox.h):
//     bounded per (sender, tag); for a (sender, tag) nobody Expects only the
//     first message is kept, the rest dropped and counted; the rest of an
//     exchange is dropped when its Expect ends. The sockets' small
//     high-water marks hold back senders while the receiver waits.
//
// Copies: the cipher's pass is the only one. A transfer piece's frame and
// bytes are two parts of one message, the bytes handed to ZeroMQ with
// zmq_msg_init_data and freed by its I/O thread once sent: a buffer given
// up (SendOwned, SendFramed) is sealed in place; bytes the caller keeps
// (Send, SendFramedFrom: a RAM disk's pages, mapped) are sealed out of
// place from where they lie into the message. The receiver opens the parts
// in place and writes the bytes straight out of them (ReceiveParts).
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
  std::string endpoint;                   // bound and advertised: tcp://<ip>:<port>
  uint64_t unauthenticated_messages = 0;  // step 6: not sealed by the process named, for this one
  uint64_t replayed_messages = 0;         // step 6: a counter not above the last one opened
  uint64_t malformed_messages = 0;        // step 6: not in the transport's framing
  uint64_t dropped_unexpected = 0;        // no receiver expected them
  uint64_t dropped_after_exchange = 0;    // left when their exchange ended
  uint64_t queued_bytes = 0;              // in the mailbox now
};
// InvalidArgument for a transport that is not a ZeroMQ one.
Result<ZmqTransportCounters> ZmqCounters(PeerTransport& transport);

}  // namespace cairn::emergency
