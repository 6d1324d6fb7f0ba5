// PeerMailbox: the messages a transport has received from its peers, queued
// per (sender, tag) until a receiver takes them, in bounded memory.
//
// A transport whose receive loop reads every peer's messages from one socket
// (ZeroMQ: zmq_transport.h) must put each message somewhere before anyone
// asks for it. Unbounded, one sender (or a bug) can pin memory with messages
// nobody takes, or stop the loop for everyone. The rules:
//   1. A receiver says which messages it waits for: PeerTransport::Expect
//      (held for a whole exchange, e.g. a directory transfer), or a Take
//      waiting on that (sender, tag). An expected (sender, tag) queues at
//      least one message and up to `per_queue_bytes`; past that (or past
//      `total_bytes` in all) HasRoom() is false and the receive loop stops
//      reading until a receiver takes one: back-pressure, with a receiver at
//      work, never a standstill.
//   2. A (sender, tag) nobody expects keeps one message (the first message of
//      an exchange may arrive before its receiver starts), within
//      `unexpected_bytes` over all such queues. Anything else for it is
//      dropped and counted (Deliver returns false): it pins no memory and
//      stalls nobody.
//   3. When the last Expect of a (sender, tag) ends, what is still queued
//      there is dropped and counted: the rest of a failed exchange is not
//      handed to the next one under the same tag.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "cairn/util/buffer.h"
#include "cairn/result.h"

namespace cairn::emergency {

class PeerMailbox {
 public:
  // A received message: `first` then `second` (either may be empty), views
  // into what `owner` keeps alive.
  struct Message {
    ByteView first, second;
    std::shared_ptr<void> owner;
    size_t size() const { return first.size() + second.size(); }
  };
  struct Limits {
    uint64_t per_queue_bytes = uint64_t{64} << 20;
    uint64_t unexpected_bytes = uint64_t{64} << 20;
    uint64_t total_bytes = uint64_t{256} << 20;
  };
  struct Counters {
    uint64_t dropped_unexpected = 0;  // rule 2
    uint64_t dropped_after_exchange = 0;  // rule 3
    uint64_t queued_bytes = 0;  // now, every queue
  };

  explicit PeerMailbox(Limits limits) : limits_(limits) {}

  // Receive loop: whether it may read another message now (rule 1), and a
  // wait of at most `max` for that to become true.
  bool HasRoom();
  bool WaitForRoom(std::chrono::milliseconds max);
  // Queues `m` (rules 1, 2); false when it was dropped.
  bool Deliver(int sender, int tag, Message m);

  // Receivers.
  void Expect(int sender, int tag);
  void EndExpect(int sender, int tag);  // rule 3 when the last one ends
  // The next message from `sender` under `tag`, waiting at most `timeout`
  // (Unavailable, with `what`, after that or once Stop was called).
  Result<Message> Take(int sender, int tag, std::chrono::nanoseconds timeout, const std::string& what);

  // Wakes every waiter; Take fails from now on.
  void Stop();
  Counters counters();

 private:
  struct Queue {
    std::deque<Message> messages;
    uint64_t bytes = 0;
    int expected = 0;
  };
  using Key = std::pair<int, int>;
  // Charged per message besides its bytes, so that empty messages count.
  static constexpr uint64_t kOverheadBytes = 64;
  static uint64_t Cost(const Message& m) { return m.size() + kOverheadBytes; }
  bool HasRoomLocked() const;
  template <typename Change>
  void Update(Queue& q, Change change);
  void Drop(std::map<Key, Queue>::iterator it);  // erases a queue nobody expects

  const Limits limits_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<Key, Queue> queues_;
  uint64_t total_bytes_ = 0;
  uint64_t unexpected_bytes_ = 0;  // in queues nobody expects
  int full_queues_ = 0;            // expected queues at or over per_queue_bytes
  Counters counters_;
  bool stopped_ = false;
};

}  // namespace cairn::emergency
