// PeerTransport: point-to-point messages between the processes of a job,
// for copying local checkpoints to peers and fetching them back.
//
// Coordinators (include/cairn/coordinator.h) carry small collective
// messages; a transport carries bulk bytes between two processes without
// involving the others. Implementations: MPI (mpi_transport.h: its own
// duplicate of MPI_COMM_WORLD, for MPI jobs) and in-process (threads of one
// process standing in for processes: tests, and single-process jobs).
//
// Contract:
//   - Messages from one sender to one receiver under one tag arrive in the
//     order sent; different tags are independent.
//   - Send returns once `bytes` may be reused; Receive returns the next
//     message. Both give up with Unavailable after `timeout`.
//   - Send and Receive may be called concurrently from different threads.
//   - A receiver of more than one message from a peer under a tag holds an
//     Expect for the exchange: a transport may keep only the first message
//     for a (sender, tag) nobody expects and drop the rest (ZeroMQ does:
//     peer_mailbox.h), and drops what is left queued when the exchange ends.
//
// Thread safety: see above.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <utility>

#include "cairn/util/buffer.h"
#include "cairn/result.h"

namespace cairn::emergency {

// Held by a receiver for the length of an exchange (PeerTransport::Expect);
// ends it when destroyed.
class Expectation {
 public:
  Expectation() = default;
  explicit Expectation(std::function<void()> end) : end_(std::move(end)) {}
  Expectation(Expectation&& other) noexcept : end_(std::exchange(other.end_, nullptr)) {}
  Expectation& operator=(Expectation&&) = delete;
  ~Expectation() {
    if (end_) end_();
  }

 private:
  std::function<void()> end_;
};

class PeerTransport {
 public:
  using Duration = std::chrono::nanoseconds;
  // Tags are in [0, kMaxTag) (MPI guarantees at least 32767).
  static constexpr int kMaxTag = 32000;
  // Directory transfers (dir_transfer.h) take tags below kMaxTransferTag and
  // answer on `tag + kMaxTransferTag`.
  static constexpr int kMaxTransferTag = kMaxTag / 2;

  virtual ~PeerTransport() = default;
  virtual int process_index() const = 0;
  virtual int process_count() const = 0;
  virtual Status Send(int dest, int tag, ByteView bytes, Duration timeout) = 0;
  // Send of a message the transport may keep instead of copying: ZeroMQ
  // hands the buffer itself to its I/O thread and frees it once sent (the
  // transfers' pieces, where a copy of every byte is on the lost host's
  // critical path). Default: Send.
  virtual Status SendOwned(int dest, int tag, Buffer bytes, Duration timeout) {
    return Send(dest, tag, bytes.view(), timeout);
  }
  // One message of `frame` followed by `bytes`, where the transport can
  // send `bytes` without copying them into the message (ZeroMQ: two message
  // parts, joined by the receiver). Default: joined here, then SendOwned.
  virtual Status SendFramed(int dest, int tag, ByteView frame, Buffer bytes, Duration timeout) {
    Buffer joined(frame.size() + bytes.size());
    std::copy(frame.begin(), frame.end(), joined.data());
    std::copy(bytes.data(), bytes.data() + bytes.size(), joined.data() + frame.size());
    return SendOwned(dest, tag, std::move(joined), timeout);
  }
  // SendFramed of bytes the caller keeps (a file's pages mapped, valid
  // until this returns), for a transport that passes every byte through a
  // cipher anyway: ZeroMQ seals them out of place into the message, so they
  // cost no copy of their own. Default: copied, then SendFramed.
  virtual Status SendFramedFrom(int dest, int tag, ByteView frame, ByteView bytes, Duration timeout) {
    return SendFramed(dest, tag, frame, Buffer::CopyOf(bytes), timeout);
  }
  // This process will receive messages from `source` under `tag` until the
  // result is destroyed (which must happen before the transport goes).
  // Pure, so that a transport wrapping another cannot forget to pass it on;
  // MPI and in-process transports queue whatever arrives and return an
  // empty Expectation.
  virtual Expectation Expect(int source, int tag) = 0;
  // ResourceExhausted (naming the sender) for a message over `max_bytes`.
  virtual Result<Buffer> Receive(int source, int tag, size_t max_bytes, Duration timeout) = 0;
  // Receive that hands the message to `consume` as the transport holds it,
  // `first` followed by `second` (ZeroMQ: the two parts of SendFramed, not
  // joined into a Buffer), and returns what `consume` returns. The views
  // are valid during the call only. Default: Receive, then consume(message,
  // empty).
  virtual Status ReceiveParts(int source, int tag, size_t max_bytes, Duration timeout,
                              const std::function<Status(ByteView first, ByteView second)>& consume) {
    CAIRN_ASSIGN_OR_RETURN(Buffer b, Receive(source, tag, max_bytes, timeout));
    return consume(b.view(), ByteView());
  }
};

// N in-process endpoints over shared mailboxes: Endpoint(i) is process i's.
class InProcessNetwork {
 public:
  explicit InProcessNetwork(int count);
  ~InProcessNetwork();
  std::shared_ptr<PeerTransport> Endpoint(int index);

  struct State;

 private:
  std::shared_ptr<State> state_;
  int count_;
};

}  // namespace cairn::emergency
