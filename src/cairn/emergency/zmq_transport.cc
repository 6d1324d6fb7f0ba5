// The ZeroMQ transport (zmq_transport.h: the handshake's numbered steps).
#include "cairn/emergency/zmq_transport.h"

#if CAIRN_HAVE_ZMQ

#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdio>
#include <functional>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "cairn/emergency/peer_mailbox.h"
#include "cairn/emergency/peer_seal.h"
#include "cairn/emergency/zmq_address.h"
#include "cairn/util/coding.h"
#include "cairn/util/hex.h"

namespace cairn::emergency {
namespace {

constexpr int kHighWaterMark = 8;  // messages queued per socket
constexpr int kMaxFrames = 4;      // routing id, header, at most two payload frames

Status ZmqError(const std::string& what) { return UnavailableError(what + ": " + zmq_strerror(zmq_errno())); }

int TimeoutMs(PeerTransport::Duration d) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  return ms > INT32_MAX ? -1 : static_cast<int>(std::max<int64_t>(ms, 1));
}

// The options every TCP socket of the transport has.
void CommonOptions(void* socket, bool ipv6) {
  const int hwm = kHighWaterMark, linger = 0, v6 = ipv6 ? 1 : 0;
  const int64_t max_frame = static_cast<int64_t>(kMaxZmqFrameBytes);
  zmq_setsockopt(socket, ZMQ_SNDHWM, &hwm, sizeof hwm);
  zmq_setsockopt(socket, ZMQ_RCVHWM, &hwm, sizeof hwm);
  zmq_setsockopt(socket, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(socket, ZMQ_MAXMSGSIZE, &max_frame, sizeof max_frame);
  zmq_setsockopt(socket, ZMQ_IPV6, &v6, sizeof v6);
}

// One process of the job as step 3 gathered it.
struct Member {
  std::string endpoint;
  peer_seal::Key public_key;
};

// Received frames, kept as ZeroMQ holds them (a PeerMailbox message's owner).
struct Frames {
  zmq_msg_t msgs[2];
  int count = 0;
  ~Frames() {
    for (int i = 0; i < count; ++i) zmq_msg_close(&msgs[i]);
  }
  ByteView View(int i) {
    return i < count ? ByteView(static_cast<const uint8_t*>(zmq_msg_data(&msgs[i])), zmq_msg_size(&msgs[i]))
                     : ByteView();
  }
  MutableByteView Mutable(int i) {
    return MutableByteView(static_cast<uint8_t*>(zmq_msg_data(&msgs[i])), zmq_msg_size(&msgs[i]));
  }
};

class ZmqTransport final : public PeerTransport {
 public:
  ZmqTransport(void* context, void* router, int index, std::vector<Member> members,
               std::vector<peer_seal::PairKeys> pair_keys, bool ipv6, std::string endpoint)
      : context_(context), router_(router), index_(index), members_(std::move(members)),
        pair_keys_(std::move(pair_keys)), ipv6_(ipv6), endpoint_(std::move(endpoint)),
        dealers_(members_.size(), nullptr), sent_(members_.size(), 0), opened_(members_.size(), 0),
        dealer_locks_(members_.size()), mailbox_(PeerMailbox::Limits{}) {
    receiver_ = std::thread([this] { ReceiveLoop(); });
  }

  ~ZmqTransport() override {
    stop_ = true;
    mailbox_.Stop();
    receiver_.join();
    for (void* d : dealers_) {
      if (d != nullptr) zmq_close(d);
    }
    zmq_close(router_);
    zmq_ctx_term(context_);
  }

  int process_index() const override { return index_; }
  int process_count() const override { return static_cast<int>(members_.size()); }

  // The bytes are the caller's: sealed out of place into the message.
  Status Send(int dest, int tag, ByteView bytes, Duration timeout) override {
    const size_t n = bytes.size();
    auto* hold = new Buffer(n);
    const MutableByteView parts[] = {MutableByteView(hold->data(), n)};
    const ByteView from[] = {bytes};
    return SendWith(dest, tag, n, 0, timeout, parts, [&](void* dealer) { return SendZeroCopy(dealer, hold); },
                    hold, from);
  }

  // Zero-copy: `bytes` are sealed in place and become the message's data,
  // freed by ZeroMQ (on its I/O thread) once sent.
  Status SendOwned(int dest, int tag, Buffer bytes, Duration timeout) override {
    const size_t n = bytes.size();
    auto* hold = new Buffer(std::move(bytes));
    const MutableByteView parts[] = {MutableByteView(hold->data(), n)};
    return SendWith(dest, tag, n, 0, timeout, parts, [&](void* dealer) { return SendZeroCopy(dealer, hold); },
                    hold);
  }

  // The frame (copied, small) as its own message part, then the bytes
  // without a copy (both sealed in place); the receiver keeps them apart
  // (ReceiveParts).
  Status SendFramed(int dest, int tag, ByteView frame, Buffer bytes, Duration timeout) override {
    return SendFramedHeld(dest, tag, frame, new Buffer(std::move(bytes)), nullptr, timeout);
  }

  // The same, the bytes sealed out of place from the caller's into the
  // message: the cipher's pass is their only copy.
  Status SendFramedFrom(int dest, int tag, ByteView frame, ByteView bytes, Duration timeout) override {
    return SendFramedHeld(dest, tag, frame, new Buffer(bytes.size()), &bytes, timeout);
  }

  Expectation Expect(int source, int tag) override {
    mailbox_.Expect(source, tag);
    return Expectation([this, source, tag] { mailbox_.EndExpect(source, tag); });
  }

  Result<Buffer> Receive(int source, int tag, size_t max_bytes, Duration timeout) override {
    CAIRN_ASSIGN_OR_RETURN(PeerMailbox::Message m, Take(source, tag, max_bytes, timeout));
    Buffer joined(m.size());
    std::copy(m.first.begin(), m.first.end(), joined.data());
    std::copy(m.second.begin(), m.second.end(), joined.data() + m.first.size());
    return joined;
  }

  // A framed piece's two parts as ZeroMQ received them: no copy.
  Status ReceiveParts(int source, int tag, size_t max_bytes, Duration timeout,
                      const std::function<Status(ByteView first, ByteView second)>& consume) override {
    CAIRN_ASSIGN_OR_RETURN(PeerMailbox::Message m, Take(source, tag, max_bytes, timeout));
    return consume(m.first, m.second);
  }

  ZmqTransportCounters Counters() {
    ZmqTransportCounters c;
    {
      std::lock_guard<std::mutex> lock(counters_mu_);
      c = counters_;
    }
    const PeerMailbox::Counters m = mailbox_.counters();
    c.endpoint = endpoint_;
    c.dropped_unexpected = m.dropped_unexpected;
    c.dropped_after_exchange = m.dropped_after_exchange;
    c.queued_bytes = m.queued_bytes;
    return c;
  }

 private:
  // Sends `hold`'s bytes as the last message part; ZeroMQ deletes `hold`
  // once sent (or here, on failure).
  static int SendZeroCopy(void* dealer, Buffer* hold) {
    zmq_msg_t msg;
    if (zmq_msg_init_data(&msg, hold->data(), hold->size(), [](void*, void* h) { delete static_cast<Buffer*>(h); },
                          hold) != 0) {
      delete hold;
      return -1;
    }
    const int rc = zmq_msg_send(&msg, dealer, 0);
    if (rc < 0) zmq_msg_close(&msg);  // frees `hold`
    return rc;
  }

  // SendFramed of `hold` (deleted here or by ZeroMQ), sealed in place, or
  // out of place from `*source` (its size) when given.
  Status SendFramedHeld(int dest, int tag, ByteView frame, Buffer* hold, const ByteView* source, Duration timeout) {
    const size_t n = hold->size();
    std::vector<uint8_t> sealed_frame(frame.begin(), frame.end());
    const MutableByteView parts[] = {MutableByteView(sealed_frame), MutableByteView(hold->data(), n)};
    const ByteView from[] = {ByteView(sealed_frame.data(), sealed_frame.size()), source ? *source : ByteView()};
    return SendWith(dest, tag, n, frame.size(), timeout, parts, [&](void* dealer) {
      if (zmq_send(dealer, sealed_frame.data(), sealed_frame.size(), ZMQ_SNDMORE) < 0) {
        delete hold;
        return -1;
      }
      return SendZeroCopy(dealer, hold);
    }, hold, source ? std::span<const ByteView>(from) : std::span<const ByteView>());
  }

  // The DEALER to `dest` (step 4), made on first use. Under dealer_locks_[dest].
  Result<void*> Dealer(int dest, const std::string& what) {
    void*& dealer = dealers_[dest];
    if (dealer != nullptr) return dealer;
    void* d = zmq_socket(context_, ZMQ_DEALER);
    if (d == nullptr) return ZmqError(what + ": zmq_socket");
    CommonOptions(d, ipv6_);
    if (zmq_connect(d, members_[dest].endpoint.c_str()) != 0) {
      zmq_close(d);
      return ZmqError(what + ": connecting to " + members_[dest].endpoint);
    }
    dealer = d;
    return d;
  }

  // Seals `parts` (in place, or from `from`: peer_seal::SealFrom) under the
  // next counter to `dest` (step 5), sends
  // the header frame, then the payload with `send_payload(dealer)` (a
  // zmq_send result: < 0 on failure). The counter is taken and the message
  // sent under one lock, so a peer receives counters in increasing order.
  // `hold`, when given, is deleted here if the payload is never handed to
  // ZeroMQ.
  Status SendWith(int dest, int tag, size_t size, size_t frame_size, Duration timeout,
                  std::span<const MutableByteView> parts, const std::function<int(void*)>& send_payload,
                  Buffer* hold, std::span<const ByteView> from = {}) {
    const std::string what = "ZeroMQ send of " + std::to_string(size + frame_size) + " bytes to process " +
                             std::to_string(dest) + " (tag " + std::to_string(tag) + ")";
    auto refuse = [&](Status s) {
      delete hold;
      return s;
    };
    if (dest < 0 || dest >= process_count() || tag < 0 || tag >= kMaxTag) {
      return refuse(InvalidArgumentError(what + ": destination or tag out of range"));
    }
    if (size > kMaxZmqFrameBytes || frame_size > kMaxZmqFrameBytes) {
      return refuse(InvalidArgumentError(what + ": a message part over the transport's limit of " +
                                         std::to_string(kMaxZmqFrameBytes) + " bytes"));
    }
    std::lock_guard<std::mutex> lock(dealer_locks_[dest]);
    auto dealer = Dealer(dest, what);
    if (!dealer.ok()) return refuse(dealer.status());
    const int ms = TimeoutMs(timeout);
    zmq_setsockopt(*dealer, ZMQ_SNDTIMEO, &ms, sizeof ms);
    std::array<uint8_t, peer_seal::kHeaderBytes> header{};
    const peer_seal::Header fields{static_cast<uint32_t>(index_), static_cast<uint32_t>(tag), ++sent_[dest]};
    if (Status sealed = peer_seal::SealFrom(pair_keys_[dest].send, fields, from, parts, header); !sealed.ok()) {
      return refuse(sealed.Annotate(what));
    }
    if (zmq_send(*dealer, header.data(), header.size(), ZMQ_SNDMORE) < 0) {
      return refuse(ZmqError(what + " (" + members_[dest].endpoint + ")"));
    }
    if (send_payload(*dealer) < 0) return ZmqError(what + " (" + members_[dest].endpoint + ")");
    return Status::OK();
  }

  Result<PeerMailbox::Message> Take(int source, int tag, size_t max_bytes, Duration timeout) {
    const std::string what =
        "ZeroMQ receive from process " + std::to_string(source) + " (tag " + std::to_string(tag) + ")";
    if (source < 0 || source >= process_count() || tag < 0 || tag >= kMaxTag) {
      return InvalidArgumentError(what + ": source or tag out of range");
    }
    CAIRN_ASSIGN_OR_RETURN(PeerMailbox::Message m, mailbox_.Take(source, tag, timeout, what));
    if (m.size() > max_bytes) {
      return ResourceExhaustedError(what + ": a message of " + std::to_string(m.size()) +
                                    " bytes exceeds the limit of " + std::to_string(max_bytes));
    }
    return m;
  }

  // Logs the 1st, 2nd, 4th, 8th, ... event of a kind (no peer floods stderr).
  void Note(uint64_t ZmqTransportCounters::*counter, const std::string& text) {
    uint64_t n;
    {
      std::lock_guard<std::mutex> lock(counters_mu_);
      n = ++(counters_.*counter);
    }
    if ((n & (n - 1)) == 0) {
      std::fprintf(stderr, "cairn: ZeroMQ transport of process %d: %s (%llu so far)\n", index_, text.c_str(),
                   static_cast<unsigned long long>(n));
    }
  }

  void ReceiveLoop() {
    while (!stop_) {
      // Without room, nothing is read while receivers take their messages.
      if (!mailbox_.HasRoom()) {
        mailbox_.WaitForRoom(std::chrono::milliseconds(5));
        continue;
      }
      zmq_pollitem_t item = {router_, 0, ZMQ_POLLIN, 0};
      if (zmq_poll(&item, 1, 100) <= 0) continue;
      if (item.revents & ZMQ_POLLIN) ReadMessage();
    }
  }

  // Step 6: one message off the ROUTER, opened into the mailbox or dropped.
  void ReadMessage() {
    std::vector<zmq_msg_t> frames;
    frames.reserve(kMaxFrames + 1);
    int more = 1;
    while (more) {
      zmq_msg_t m;
      zmq_msg_init(&m);
      if (zmq_msg_recv(&m, router_, 0) < 0) {
        zmq_msg_close(&m);
        break;
      }
      more = zmq_msg_more(&m);
      if (frames.size() < kMaxFrames + 1) frames.push_back(m);
      else zmq_msg_close(&m);
    }
    auto close_all = [&] {
      for (zmq_msg_t& m : frames) zmq_msg_close(&m);
    };
    const bool framed =
        !more && (frames.size() == 3 || frames.size() == 4) && zmq_msg_size(&frames[1]) == peer_seal::kHeaderBytes;
    const ByteView header_bytes =
        framed ? ByteView(static_cast<const uint8_t*>(zmq_msg_data(&frames[1])), peer_seal::kHeaderBytes) : ByteView();
    auto header = framed ? peer_seal::ReadHeader(header_bytes) : Result<peer_seal::Header>(DataLossError(""));
    if (!header.ok() || header->sender >= static_cast<uint32_t>(process_count()) ||
        header->tag >= static_cast<uint32_t>(kMaxTag)) {
      close_all();
      Note(&ZmqTransportCounters::malformed_messages, "dropped a message not in the transport's framing");
      return;
    }
    const int sender = static_cast<int>(header->sender);
    const uint32_t tag = header->tag;
    if (header->counter <= opened_[sender]) {
      close_all();
      Note(&ZmqTransportCounters::replayed_messages,
           "dropped a message naming process " + std::to_string(sender) + " with counter " +
               std::to_string(header->counter) + ", not above the last one opened (a replay)");
      return;
    }
    auto kept = std::make_shared<Frames>();
    for (size_t i = 2; i < frames.size(); ++i) {
      zmq_msg_init(&kept->msgs[kept->count]);
      zmq_msg_move(&kept->msgs[kept->count++], &frames[i]);
    }
    std::vector<MutableByteView> parts;
    for (int i = 0; i < kept->count; ++i) parts.push_back(kept->Mutable(i));
    const Status opened = peer_seal::Open(pair_keys_[sender].receive, header_bytes, parts);
    close_all();
    if (!opened.ok()) {
      Note(&ZmqTransportCounters::unauthenticated_messages,
           "dropped a message naming process " + std::to_string(sender) + " (tag " + std::to_string(tag) +
               ") that is not sealed by it for this process");
      return;
    }
    opened_[sender] = header->counter;
    PeerMailbox::Message message{kept->View(0), kept->View(1), kept};
    const size_t size = message.size();
    if (!mailbox_.Deliver(sender, static_cast<int>(tag), std::move(message))) {
      const uint64_t n = mailbox_.counters().dropped_unexpected;
      if ((n & (n - 1)) == 0) {
        std::fprintf(stderr,
                     "cairn: ZeroMQ transport of process %d: dropped a message of %zu bytes from process %d "
                     "(tag %u) that no receiver expects (%llu so far)\n",
                     index_, size, sender, tag, static_cast<unsigned long long>(n));
      }
    }
  }

  void* context_;
  void* router_;  // used by the receiver thread only
  const int index_;
  const std::vector<Member> members_;
  const std::vector<peer_seal::PairKeys> pair_keys_;  // by process
  const bool ipv6_;
  const std::string endpoint_;
  std::vector<void*> dealers_;
  std::vector<uint64_t> sent_;    // the last counter sent to each process, under dealer_locks_
  std::vector<uint64_t> opened_;  // the last counter opened from each process (receiver thread)
  std::vector<std::mutex> dealer_locks_;
  PeerMailbox mailbox_;
  std::mutex counters_mu_;
  ZmqTransportCounters counters_;
  std::thread receiver_;
  std::atomic<bool> stop_{false};
};

}  // namespace

namespace {

// Step 2 on this process: the ROUTER bound to `bind` only. Fills
// `endpoint` with what was bound.
Status OpenRouter(void* context, const zmq_address::BindAddress& bind, void*& router, std::string& endpoint) {
  router = zmq_socket(context, ZMQ_ROUTER);
  if (router == nullptr) return ZmqError("zmq_socket(ROUTER)");
  CommonOptions(router, bind.ipv6);
  const std::string wanted = bind.Endpoint("*");
  if (zmq_bind(router, wanted.c_str()) != 0) return ZmqError("binding the ZeroMQ transport to " + wanted);
  char last[256] = {};
  size_t size = sizeof last;
  zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, last, &size);
  endpoint = last;
  return Status::OK();
}

std::string Hex(const peer_seal::Key& key) { return HexLower(key.data(), key.size()); }

Result<peer_seal::Key> KeyFromHex(const std::string& text) {
  peer_seal::Key key{};
  if (text.size() != 2 * key.size()) return DataLossError("key length");
  for (size_t i = 0; i < key.size(); ++i) {
    const int hi = HexDigit(text[2 * i]), lo = HexDigit(text[2 * i + 1]);
    if (hi < 0 || lo < 0) return DataLossError("key digits");
    key[i] = static_cast<uint8_t>(hi << 4 | lo);
  }
  return key;
}

}  // namespace

Result<std::shared_ptr<PeerTransport>> NewZmqTransport(Coordinator& coordinator, const std::string& host,
                                                       Coordinator::Duration timeout) {
  // Steps 1-2.
  void* context = zmq_ctx_new();
  if (context == nullptr) return ZmqError("zmq_ctx_new");
  // Two I/O threads: what this process sends and what it receives (a
  // replication is both at once) do not take turns.
  zmq_ctx_set(context, ZMQ_IO_THREADS, 2);
  void* router = nullptr;
  std::string endpoint;
  auto keys = peer_seal::NewKeyPair();
  auto bind = zmq_address::ResolveBindAddress(host);
  Status local = !keys.ok() ? keys.status() : bind.status();
  if (local.ok()) local = OpenRouter(context, *bind, router, endpoint);
  auto cleanup = [&] {
    if (router != nullptr) zmq_close(router);
    zmq_ctx_term(context);
  };
  const int me = coordinator.process_index();
  Status agreed = AgreeOnStatus(coordinator, "cairn/emergency/zmq/bound",
                                local.Annotate("process " + std::to_string(me) + " setting up ZeroMQ"), timeout);
  if (!agreed.ok()) {
    cleanup();
    return agreed;
  }
  // Step 3.
  char name[256] = {};
  gethostname(name, sizeof name - 1);
  const std::string mine =
      endpoint + "\n" + Hex(keys->public_key) + "\n" + name + "\n" + (bind->loopback ? "1" : "0");
  auto all = coordinator.AllGather("cairn/emergency/zmq/members", mine, timeout);
  if (!all.ok()) {
    cleanup();
    return all.status();
  }
  std::vector<Member> members;
  std::vector<std::string> hosts, loopback;
  Status parsed;
  for (size_t i = 0; i < all->size() && parsed.ok(); ++i) {
    std::vector<std::string> fields;
    for (size_t start = 0;;) {
      const size_t end = (*all)[i].find('\n', start);
      fields.push_back((*all)[i].substr(start, end == std::string::npos ? std::string::npos : end - start));
      if (end == std::string::npos) break;
      start = end + 1;
    }
    auto key = fields.size() == 4 ? KeyFromHex(fields[1]) : Result<peer_seal::Key>(DataLossError("fields"));
    if (!key.ok()) {
      parsed = DataLossError("the ZeroMQ endpoint and key of process " + std::to_string(i) +
                             " from the coordinator are malformed");
      break;
    }
    members.push_back({fields[0], *key});
    hosts.push_back(fields[2]);
    if (fields[3] == "1") loopback.push_back(fields[0]);
  }
  for (size_t i = 0; i < hosts.size() && parsed.ok() && !loopback.empty(); ++i) {
    if (hosts[i] != hosts[0]) {
      parsed = FailedPreconditionError("the ZeroMQ transport would listen on a loopback address (" + loopback[0] +
                                       ") in a job whose processes run on several hosts (" + hosts[0] + ", " +
                                       hosts[i] + "): give each process the address to advertise (zmq_host)");
    }
  }
  // Step 4: the pair keys (an unusable key, from a coordinator that hands
  // out garbage, fails every process alike).
  std::vector<peer_seal::PairKeys> pair_keys;
  for (size_t i = 0; i < members.size() && parsed.ok(); ++i) {
    auto derived = peer_seal::DerivePairKeys(*keys, members[i].public_key);
    if (!derived.ok()) parsed = derived.status().Annotate("the key of process " + std::to_string(i));
    else pair_keys.push_back(*derived);
  }
  if (!parsed.ok()) {
    cleanup();
    return parsed;
  }
  return std::shared_ptr<PeerTransport>(
      new ZmqTransport(context, router, me, std::move(members), std::move(pair_keys), bind->ipv6, endpoint));
}

Result<ZmqTransportCounters> ZmqCounters(PeerTransport& transport) {
  auto* zmq = dynamic_cast<ZmqTransport*>(&transport);
  if (zmq == nullptr) return InvalidArgumentError("not a ZeroMQ transport");
  return zmq->Counters();
}

bool ZmqTransportAvailable() { return true; }

}  // namespace cairn::emergency

#else  // !CAIRN_HAVE_ZMQ

namespace cairn::emergency {

Result<std::shared_ptr<PeerTransport>> NewZmqTransport(Coordinator&, const std::string&, Coordinator::Duration) {
  return UnimplementedError("cairn was built without ZeroMQ (-DCAIRN_WITH_ZMQ=OFF)");
}

Result<ZmqTransportCounters> ZmqCounters(PeerTransport&) {
  return UnimplementedError("cairn was built without ZeroMQ (-DCAIRN_WITH_ZMQ=OFF)");
}

bool ZmqTransportAvailable() { return false; }

}  // namespace cairn::emergency

#endif
