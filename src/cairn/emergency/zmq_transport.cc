// The ZeroMQ transport (zmq_transport.h: the handshake's numbered steps).
#include "cairn/emergency/zmq_transport.h"

#if CAIRN_HAVE_ZMQ

#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "cairn/emergency/peer_mailbox.h"
#include "cairn/emergency/zmq_curve.h"
#include "cairn/util/coding.h"

namespace cairn::emergency {
namespace {

constexpr int kHighWaterMark = 8;  // messages queued per socket
constexpr int kMaxFrames = 4;      // routing id, header, at most two payload frames
constexpr char kZapEndpoint[] = "inproc://zeromq.zap.01";

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
  std::string public_key;  // 32 bytes
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
};

class ZmqTransport final : public PeerTransport {
 public:
  ZmqTransport(void* context, void* router, void* zap, int index, std::vector<Member> members,
               zmq_curve::Keys keys, bool ipv6, std::string endpoint)
      : context_(context), router_(router), zap_(zap), index_(index), members_(std::move(members)),
        keys_(std::move(keys)), ipv6_(ipv6), endpoint_(std::move(endpoint)), dealers_(members_.size(), nullptr),
        dealer_locks_(members_.size()), mailbox_(PeerMailbox::Limits{}) {
    for (size_t i = 0; i < members_.size(); ++i) job_keys_[members_[i].public_key] = static_cast<int>(i);
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
    zmq_close(zap_);
    zmq_ctx_term(context_);
  }

  int process_index() const override { return index_; }
  int process_count() const override { return static_cast<int>(members_.size()); }

  Status Send(int dest, int tag, ByteView bytes, Duration timeout) override {
    return SendWith(dest, tag, bytes.size(), 0, timeout,
                    [&](void* dealer) { return zmq_send(dealer, bytes.data(), bytes.size(), 0); });
  }

  // Zero-copy: the message's data is `bytes` itself, freed by ZeroMQ (on
  // its I/O thread) once sent.
  Status SendOwned(int dest, int tag, Buffer bytes, Duration timeout) override {
    const size_t n = bytes.size();
    auto* hold = new Buffer(std::move(bytes));
    return SendWith(dest, tag, n, 0, timeout, [&](void* dealer) { return SendZeroCopy(dealer, hold); }, hold);
  }

  // The frame (copied, small) as its own message part, then the bytes
  // without a copy; the receiver keeps them apart (ReceiveParts).
  Status SendFramed(int dest, int tag, ByteView frame, Buffer bytes, Duration timeout) override {
    const size_t n = bytes.size();
    auto* hold = new Buffer(std::move(bytes));
    return SendWith(dest, tag, n, frame.size(), timeout, [&](void* dealer) {
      if (zmq_send(dealer, frame.data(), frame.size(), ZMQ_SNDMORE) < 0) {
        delete hold;
        return -1;
      }
      return SendZeroCopy(dealer, hold);
    }, hold);
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

  // The DEALER to `dest` (step 4), made on first use. Under dealer_locks_[dest].
  Result<void*> Dealer(int dest, const std::string& what) {
    void*& dealer = dealers_[dest];
    if (dealer != nullptr) return dealer;
    void* d = zmq_socket(context_, ZMQ_DEALER);
    if (d == nullptr) return ZmqError(what + ": zmq_socket");
    CommonOptions(d, ipv6_);
    CAIRN_ASSIGN_OR_RETURN(std::string pub, zmq_curve::DecodeKey(keys_.public_z85));
    CAIRN_ASSIGN_OR_RETURN(std::string sec, zmq_curve::DecodeKey(keys_.secret_z85));
    const std::string& server = members_[dest].public_key;
    if (zmq_setsockopt(d, ZMQ_CURVE_SERVERKEY, server.data(), server.size()) != 0 ||
        zmq_setsockopt(d, ZMQ_CURVE_PUBLICKEY, pub.data(), pub.size()) != 0 ||
        zmq_setsockopt(d, ZMQ_CURVE_SECRETKEY, sec.data(), sec.size()) != 0) {
      zmq_close(d);
      return ZmqError(what + ": setting CURVE keys");
    }
    if (zmq_connect(d, members_[dest].endpoint.c_str()) != 0) {
      zmq_close(d);
      return ZmqError(what + ": connecting to " + members_[dest].endpoint);
    }
    dealer = d;
    return d;
  }

  // Sends the header frame, then the payload with `send_payload(dealer)`
  // (a zmq_send result: < 0 on failure). `hold`, when given, is deleted
  // here if the payload is never handed to ZeroMQ.
  Status SendWith(int dest, int tag, size_t size, size_t frame_size, Duration timeout,
                  const std::function<int(void*)>& send_payload, Buffer* hold = nullptr) {
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
    uint8_t header[8];
    StoreLE32(header, static_cast<uint32_t>(index_));
    StoreLE32(header + 4, static_cast<uint32_t>(tag));
    if (zmq_send(*dealer, header, sizeof header, ZMQ_SNDMORE) < 0) {
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
      zmq_pollitem_t items[2] = {{zap_, 0, ZMQ_POLLIN, 0}, {router_, 0, ZMQ_POLLIN, 0}};
      const bool room = mailbox_.HasRoom();
      // Without room, only the ZAP handler is served (handshakes go on)
      // while receivers take their messages.
      if (!room) mailbox_.WaitForRoom(std::chrono::milliseconds(5));
      if (zmq_poll(items, room ? 2 : 1, room ? 100 : 0) <= 0) continue;
      if (items[0].revents & ZMQ_POLLIN) {
        std::string peer;
        if (!zmq_curve::AnswerZapRequest(zap_, job_keys_, peer)) {
          Note(&ZmqTransportCounters::refused_connections, "refused a connection from " + peer +
                                                               " whose key is not one of this job's processes");
        }
      }
      if (room && (items[1].revents & ZMQ_POLLIN)) ReadMessage();
    }
  }

  // Step 6: one message off the ROUTER, into the mailbox or dropped.
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
    int user = -1;
    const char* user_id = frames.size() > 1 ? zmq_msg_gets(&frames[1], "User-Id") : nullptr;
    if (user_id != nullptr) {
      const std::string_view u(user_id);
      if (std::from_chars(u.data(), u.data() + u.size(), user).ec != std::errc()) user = -1;
    }
    const bool framed = !more && (frames.size() == 3 || frames.size() == 4) && zmq_msg_size(&frames[1]) == 8;
    const auto* header = framed ? static_cast<const uint8_t*>(zmq_msg_data(&frames[1])) : nullptr;
    const uint32_t claimed = framed ? LoadLE32(header) : 0, tag = framed ? LoadLE32(header + 4) : 0;
    if (!framed || user < 0 || user >= process_count() || tag >= static_cast<uint32_t>(kMaxTag)) {
      close_all();
      Note(&ZmqTransportCounters::malformed_messages,
           "dropped a message not in the transport's framing from process " + std::to_string(user));
      return;
    }
    if (claimed != static_cast<uint32_t>(user)) {
      close_all();
      Note(&ZmqTransportCounters::forged_senders, "dropped a message from process " + std::to_string(user) +
                                                      " claiming to be process " + std::to_string(claimed) +
                                                      " (tag " + std::to_string(tag) + ")");
      return;
    }
    auto kept = std::make_shared<Frames>();
    for (size_t i = 2; i < frames.size(); ++i) {
      zmq_msg_init(&kept->msgs[kept->count]);
      zmq_msg_move(&kept->msgs[kept->count++], &frames[i]);
    }
    close_all();
    PeerMailbox::Message message{kept->View(0), kept->View(1), kept};
    const size_t size = message.size();
    if (!mailbox_.Deliver(user, static_cast<int>(tag), std::move(message))) {
      const uint64_t n = mailbox_.counters().dropped_unexpected;
      if ((n & (n - 1)) == 0) {
        std::fprintf(stderr,
                     "cairn: ZeroMQ transport of process %d: dropped a message of %zu bytes from process %d "
                     "(tag %u) that no receiver expects (%llu so far)\n",
                     index_, size, user, tag, static_cast<unsigned long long>(n));
      }
    }
  }

  void* context_;
  void* router_;  // used by the receiver thread only
  void* zap_;     // likewise
  const int index_;
  const std::vector<Member> members_;
  const zmq_curve::Keys keys_;
  const bool ipv6_;
  const std::string endpoint_;
  std::map<std::string, int> job_keys_;  // public key -> process index
  std::vector<void*> dealers_;
  std::vector<std::mutex> dealer_locks_;
  PeerMailbox mailbox_;
  std::mutex counters_mu_;
  ZmqTransportCounters counters_;
  std::thread receiver_;
  std::atomic<bool> stop_{false};
};

}  // namespace

namespace {

// Steps 1-2 on this process: the keypair, the ZAP handler, then the ROUTER
// bound to `bind` only. Fills `endpoint` with what was bound.
Status OpenSockets(void* context, const zmq_curve::BindAddress& bind, const zmq_curve::Keys& keys, void*& zap,
                   void*& router, std::string& endpoint) {
  zap = zmq_socket(context, ZMQ_REP);
  if (zap == nullptr) return ZmqError("zmq_socket(REP)");
  const int linger = 0;
  zmq_setsockopt(zap, ZMQ_LINGER, &linger, sizeof linger);
  if (zmq_bind(zap, kZapEndpoint) != 0) return ZmqError(std::string("binding the ZAP handler ") + kZapEndpoint);
  router = zmq_socket(context, ZMQ_ROUTER);
  if (router == nullptr) return ZmqError("zmq_socket(ROUTER)");
  CommonOptions(router, bind.ipv6);
  CAIRN_ASSIGN_OR_RETURN(std::string secret, zmq_curve::DecodeKey(keys.secret_z85));
  const int server = 1;
  const std::string domain = "cairn";
  if (zmq_setsockopt(router, ZMQ_CURVE_SERVER, &server, sizeof server) != 0 ||
      zmq_setsockopt(router, ZMQ_CURVE_SECRETKEY, secret.data(), secret.size()) != 0 ||
      zmq_setsockopt(router, ZMQ_ZAP_DOMAIN, domain.data(), domain.size()) != 0) {
    return ZmqError("making the ROUTER socket a CURVE server");
  }
  const std::string wanted = bind.Endpoint("*");
  if (zmq_bind(router, wanted.c_str()) != 0) return ZmqError("binding the ZeroMQ transport to " + wanted);
  char last[256] = {};
  size_t size = sizeof last;
  zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, last, &size);
  endpoint = last;
  return Status::OK();
}

}  // namespace

Result<std::shared_ptr<PeerTransport>> NewZmqTransport(Coordinator& coordinator, const std::string& host,
                                                       Coordinator::Duration timeout) {
  // Steps 1-2.
  void* context = zmq_ctx_new();
  if (context == nullptr) return ZmqError("zmq_ctx_new");
  // CURVE encrypts on the I/O threads: two, so that what this process sends
  // and what it receives (a replication is both at once) are not
  // encrypted and decrypted by one thread in turn.
  zmq_ctx_set(context, ZMQ_IO_THREADS, 2);
  void* zap = nullptr;
  void* router = nullptr;
  std::string endpoint;
  auto keys = zmq_curve::NewKeys();
  auto bind = zmq_curve::ResolveBindAddress(host);
  Status local = !keys.ok() ? keys.status() : bind.status();
  if (local.ok()) local = OpenSockets(context, *bind, *keys, zap, router, endpoint);
  auto cleanup = [&] {
    if (router != nullptr) zmq_close(router);
    if (zap != nullptr) zmq_close(zap);
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
  const std::string mine = endpoint + "\n" + keys->public_z85 + "\n" + name + "\n" + (bind->loopback ? "1" : "0");
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
    auto key = fields.size() == 4 ? zmq_curve::DecodeKey(fields[1]) : Result<std::string>(DataLossError("fields"));
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
  if (!parsed.ok()) {
    cleanup();
    return parsed;
  }
  return std::shared_ptr<PeerTransport>(
      new ZmqTransport(context, router, zap, me, std::move(members), std::move(*keys), bind->ipv6, endpoint));
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
