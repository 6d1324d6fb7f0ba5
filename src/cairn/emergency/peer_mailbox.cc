// PeerMailbox (peer_mailbox.h: the numbered rules there).
#include "cairn/emergency/peer_mailbox.h"

namespace cairn::emergency {
// Runs `change` on `q` keeping the running sums (bytes in queues nobody
// expects, expected queues that are full) right.
template <typename Change>
void PeerMailbox::Update(Queue& q, Change change) {
  auto full = [&] { return q.expected > 0 && q.bytes >= limits_.per_queue_bytes; };
  if (q.expected == 0) unexpected_bytes_ -= q.bytes;
  if (full()) --full_queues_;
  change();
  if (q.expected == 0) unexpected_bytes_ += q.bytes;
  if (full()) ++full_queues_;
}


bool PeerMailbox::HasRoomLocked() const { return full_queues_ == 0 && total_bytes_ < limits_.total_bytes; }

bool PeerMailbox::HasRoom() {
  std::lock_guard<std::mutex> lock(mu_);
  return HasRoomLocked();
}

bool PeerMailbox::WaitForRoom(std::chrono::milliseconds max) {
  std::unique_lock<std::mutex> lock(mu_);
  return cv_.wait_for(lock, max, [&] { return stopped_ || HasRoomLocked(); }) && !stopped_;
}

bool PeerMailbox::Deliver(int sender, int tag, Message m) {
  const uint64_t cost = Cost(m);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = queues_.try_emplace({sender, tag}).first;
  Queue& q = it->second;
  if (q.expected == 0 && (!q.messages.empty() || unexpected_bytes_ + cost > limits_.unexpected_bytes)) {
    ++counters_.dropped_unexpected;
    if (q.messages.empty()) queues_.erase(it);
    return false;  // rule 2
  }
  Update(q, [&] {
    q.bytes += cost;
    q.messages.push_back(std::move(m));
  });
  total_bytes_ += cost;
  cv_.notify_all();
  return true;
}

void PeerMailbox::Expect(int sender, int tag) {
  std::lock_guard<std::mutex> lock(mu_);
  Queue& q = queues_[{sender, tag}];
  Update(q, [&] { ++q.expected; });
}

void PeerMailbox::Drop(std::map<Key, Queue>::iterator it) {
  Queue& q = it->second;
  counters_.dropped_after_exchange += q.messages.size();
  unexpected_bytes_ -= q.bytes;
  total_bytes_ -= q.bytes;
  queues_.erase(it);
  cv_.notify_all();
}

void PeerMailbox::EndExpect(int sender, int tag) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = queues_.find({sender, tag});
  if (it == queues_.end() || it->second.expected == 0) return;
  Queue& q = it->second;
  Update(q, [&] { --q.expected; });
  if (q.expected == 0) Drop(it);  // rule 3
}

Result<PeerMailbox::Message> PeerMailbox::Take(int sender, int tag, std::chrono::nanoseconds timeout,
                                               const std::string& what) {
  std::unique_lock<std::mutex> lock(mu_);
  auto it = queues_.try_emplace({sender, tag}).first;  // map iterators stay valid
  Queue& q = it->second;
  // Waiting on it makes the queue expected (rule 1) for the wait only: its
  // end drops nothing.
  Update(q, [&] { ++q.expected; });
  const bool got = cv_.wait_for(lock, timeout, [&] { return stopped_ || !q.messages.empty(); }) && !stopped_;
  Message m;
  Update(q, [&] {
    --q.expected;
    if (got) {
      m = std::move(q.messages.front());
      q.messages.pop_front();
      q.bytes -= Cost(m);
    }
  });
  if (got) total_bytes_ -= Cost(m);
  if (q.expected == 0 && q.messages.empty()) queues_.erase(it);
  cv_.notify_all();
  if (!got) return UnavailableError(what + (stopped_ ? ": the transport is closing" : ": no message in time"));
  return m;
}

void PeerMailbox::Stop() {
  std::lock_guard<std::mutex> lock(mu_);
  stopped_ = true;
  cv_.notify_all();
}

PeerMailbox::Counters PeerMailbox::counters() {
  std::lock_guard<std::mutex> lock(mu_);
  Counters c = counters_;
  c.queued_bytes = total_bytes_;
  return c;
}

}  // namespace cairn::emergency
