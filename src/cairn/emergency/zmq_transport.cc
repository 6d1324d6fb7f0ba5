// The ZeroMQ transport (zmq_transport.h).
#include "cairn/emergency/zmq_transport.h"

#if CAIRN_HAVE_ZMQ

#include <unistd.h>
#include <zmq.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "cairn/util/coding.h"

namespace cairn::emergency {
namespace {

constexpr uint64_t kMaxQueuedBytes = uint64_t{256} << 20;
constexpr int kHighWaterMark = 8;  // messages queued per socket

Status ZmqError(const std::string& what) {
  return UnavailableError(what + ": " + zmq_strerror(zmq_errno()));
}

int TimeoutMs(PeerTransport::Duration d) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  return ms > INT32_MAX ? -1 : static_cast<int>(std::max<int64_t>(ms, 1));
}

class ZmqTransport final : public PeerTransport {
 public:
  ZmqTransport(void* context, void* router, int index, std::vector<std::string> endpoints)
      : context_(context), router_(router), index_(index), endpoints_(std::move(endpoints)),
        dealers_(endpoints_.size(), nullptr), dealer_locks_(endpoints_.size()) {
    receiver_ = std::thread([this] { ReceiveLoop(); });
  }

  ~ZmqTransport() override {
    stop_ = true;
    cv_.notify_all();
    receiver_.join();
    queues_.clear();  // messages still queued, before the context goes
    for (void* d : dealers_) {
      if (d != nullptr) zmq_close(d);
    }
    zmq_close(router_);
    zmq_ctx_term(context_);
  }

  int process_index() const override { return index_; }
  int process_count() const override { return static_cast<int>(endpoints_.size()); }

  Status Send(int dest, int tag, ByteView bytes, Duration timeout) override {
    return SendWith(dest, tag, bytes.size(), timeout,
                    [&](void* dealer) { return zmq_send(dealer, bytes.data(), bytes.size(), 0); });
  }

  // Zero-copy: the message's data is `bytes` itself, freed by ZeroMQ (on
  // its I/O thread) once sent.
  Status SendOwned(int dest, int tag, Buffer bytes, Duration timeout) override {
    const size_t n = bytes.size();
    auto* hold = new Buffer(std::move(bytes));
    return SendWith(dest, tag, n, timeout, [&](void* dealer) { return SendZeroCopy(dealer, hold, 0); });
  }

  // The frame (copied, small) as its own message part, then the bytes
  // without a copy; the receiver joins them.
  Status SendFramed(int dest, int tag, ByteView frame, Buffer bytes, Duration timeout) override {
    const size_t n = frame.size() + bytes.size();
    auto* hold = new Buffer(std::move(bytes));
    return SendWith(dest, tag, n, timeout, [&](void* dealer) {
      if (zmq_send(dealer, frame.data(), frame.size(), ZMQ_SNDMORE) < 0) {
        delete hold;
        return -1;
      }
      return SendZeroCopy(dealer, hold, 0);
    });
  }

 private:
  // Sends `hold`'s bytes as the next message part; ZeroMQ deletes `hold`
  // once sent (or here, on failure).
  static int SendZeroCopy(void* dealer, Buffer* hold, int flags) {
      zmq_msg_t msg;
      if (zmq_msg_init_data(&msg, hold->data(), hold->size(), [](void*, void* h) { delete static_cast<Buffer*>(h); },
                            hold) != 0) {
        delete hold;
        return -1;
      }
      const int rc = zmq_msg_send(&msg, dealer, flags);
      if (rc < 0) zmq_msg_close(&msg);  // frees `hold`
      return rc;
  }

  // Sends the header frame, then the payload with `send_payload(dealer)`
  // (a zmq_send result: < 0 on failure).
  Status SendWith(int dest, int tag, size_t size, Duration timeout, const std::function<int(void*)>& send_payload) {
    const std::string what = "ZeroMQ send of " + std::to_string(size) + " bytes to process " +
                             std::to_string(dest) + " (tag " + std::to_string(tag) + ")";
    if (dest < 0 || dest >= process_count() || tag < 0 || tag >= kMaxTag) {
      return InvalidArgumentError(what + ": destination or tag out of range");
    }
    std::lock_guard<std::mutex> lock(dealer_locks_[dest]);
    void*& dealer = dealers_[dest];
    if (dealer == nullptr) {
      dealer = zmq_socket(context_, ZMQ_DEALER);
      if (dealer == nullptr) return ZmqError(what + ": zmq_socket");
      const int hwm = kHighWaterMark, linger = 0;
      zmq_setsockopt(dealer, ZMQ_SNDHWM, &hwm, sizeof hwm);
      zmq_setsockopt(dealer, ZMQ_LINGER, &linger, sizeof linger);
      if (zmq_connect(dealer, endpoints_[dest].c_str()) != 0) {
        return ZmqError(what + ": connecting to " + endpoints_[dest]);
      }
    }
    const int ms = TimeoutMs(timeout);
    zmq_setsockopt(dealer, ZMQ_SNDTIMEO, &ms, sizeof ms);
    uint8_t header[8];
    StoreLE32(header, static_cast<uint32_t>(index_));
    StoreLE32(header + 4, static_cast<uint32_t>(tag));
    if (zmq_send(dealer, header, sizeof header, ZMQ_SNDMORE) < 0 || send_payload(dealer) < 0) {
      return ZmqError(what + " (" + endpoints_[dest] + ")");
    }
    return Status::OK();
  }

 public:
  Result<Buffer> Receive(int source, int tag, size_t max_bytes, Duration timeout) override {
    CAIRN_ASSIGN_OR_RETURN(Queued q, Pop(source, tag, max_bytes, timeout));
    if (q.parts == nullptr) return std::move(q.joined);
    Buffer joined(q.size);
    const ByteView a = q.parts->View(0), b = q.parts->View(1);
    std::copy(a.begin(), a.end(), joined.data());
    std::copy(b.begin(), b.end(), joined.data() + a.size());
    return joined;
  }

  // A framed piece's two parts as ZeroMQ received them: no copy.
  Status ReceiveParts(int source, int tag, size_t max_bytes, Duration timeout,
                      const std::function<Status(ByteView first, ByteView second)>& consume) override {
    CAIRN_ASSIGN_OR_RETURN(Queued q, Pop(source, tag, max_bytes, timeout));
    if (q.parts == nullptr) return consume(q.joined.view(), ByteView());
    return consume(q.parts->View(0), q.parts->View(1));
  }

 private:
  // The two payload parts of a SendFramed message, closed when destroyed
  // (any thread may close a ZeroMQ message).
  struct Parts {
    zmq_msg_t msgs[2];
    ~Parts() {
      for (zmq_msg_t& m : msgs) zmq_msg_close(&m);
    }
    ByteView View(int i) {
      return ByteView(static_cast<const uint8_t*>(zmq_msg_data(&msgs[i])), zmq_msg_size(&msgs[i]));
    }
  };
  // A queued message: joined into a Buffer, or the parts as received.
  struct Queued {
    Buffer joined;
    std::unique_ptr<Parts> parts;
    size_t size = 0;
  };

  Result<Queued> Pop(int source, int tag, size_t max_bytes, Duration timeout) {
    const std::string what =
        "ZeroMQ receive from process " + std::to_string(source) + " (tag " + std::to_string(tag) + ")";
    std::unique_lock<std::mutex> lock(mu_);
    auto& queue = queues_[{source, tag}];
    if (!cv_.wait_for(lock, timeout, [&] { return !queue.empty() || !error_.ok(); })) {
      return UnavailableError(what + ": no message in time");
    }
    if (queue.empty()) return error_.Annotate(what);
    Queued q = std::move(queue.front());
    queue.pop_front();
    queued_bytes_ -= q.size;
    cv_.notify_all();
    if (q.size > max_bytes) {
      return ResourceExhaustedError(what + ": a message of " + std::to_string(q.size) +
                                    " bytes exceeds the limit of " + std::to_string(max_bytes));
    }
    return q;
  }

 private:
  void ReceiveLoop() {
    while (!stop_) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return stop_ || queued_bytes_ < kMaxQueuedBytes; });
        if (stop_) return;
        if (queued_bytes_ >= kMaxQueuedBytes) continue;
      }
      zmq_pollitem_t item{router_, 0, ZMQ_POLLIN, 0};
      if (zmq_poll(&item, 1, 100) <= 0 || !(item.revents & ZMQ_POLLIN)) continue;
      // Frames: identity, header, then the payload in one frame (copied
      // out) or two (SendFramed: a frame and the bytes, kept as received).
      std::vector<zmq_msg_t> frames;
      int more = 1;
      while (more) {
        frames.emplace_back();
        zmq_msg_init(&frames.back());
        if (zmq_msg_recv(&frames.back(), router_, 0) < 0) break;
        more = zmq_msg_more(&frames.back());
      }
      auto bytes_of = [&](size_t i) {
        return ByteView(static_cast<const uint8_t*>(zmq_msg_data(&frames[i])), zmq_msg_size(&frames[i]));
      };
      const bool ours = !more && (frames.size() == 3 || frames.size() == 4) && bytes_of(1).size() == 8;
      Queued q;
      int source = -1, tag = -1;
      if (ours) {
        source = static_cast<int>(LoadLE32(bytes_of(1).data()));
        tag = static_cast<int>(LoadLE32(bytes_of(1).data() + 4));
        if (frames.size() == 3) {
          q.joined = Buffer::CopyOf(bytes_of(2));
          q.size = q.joined.size();
        } else {
          q.size = bytes_of(2).size() + bytes_of(3).size();
          q.parts = std::make_unique<Parts>();
          for (int i = 0; i < 2; ++i) {
            zmq_msg_init(&q.parts->msgs[i]);
            zmq_msg_move(&q.parts->msgs[i], &frames[2 + i]);
          }
        }
      }
      for (zmq_msg_t& m : frames) zmq_msg_close(&m);
      if (!ours) continue;  // not one of ours
      std::lock_guard<std::mutex> lock(mu_);
      queued_bytes_ += q.size;
      queues_[{source, tag}].push_back(std::move(q));
      cv_.notify_all();
    }
  }

  void* context_;
  void* router_;  // used by the receiver thread only
  const int index_;
  const std::vector<std::string> endpoints_;
  std::vector<void*> dealers_;
  std::vector<std::mutex> dealer_locks_;
  std::thread receiver_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::pair<int, int>, std::deque<Queued>> queues_;
  uint64_t queued_bytes_ = 0;
  Status error_;
};

}  // namespace

Result<std::shared_ptr<PeerTransport>> NewZmqTransport(Coordinator& coordinator, const std::string& host,
                                                       Coordinator::Duration timeout) {
  std::string advertised = host;
  if (advertised.empty()) {
    char name[256] = {};
    if (gethostname(name, sizeof name - 1) != 0) return UnavailableError("gethostname failed");
    advertised = name;
  }
  void* context = zmq_ctx_new();
  if (context == nullptr) return ZmqError("zmq_ctx_new");
  void* router = zmq_socket(context, ZMQ_ROUTER);
  Status local;
  std::string endpoint;
  if (router == nullptr) {
    local = ZmqError("zmq_socket(ROUTER)");
  } else {
    const int hwm = kHighWaterMark, linger = 0;
    zmq_setsockopt(router, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(router, ZMQ_LINGER, &linger, sizeof linger);
    if (zmq_bind(router, "tcp://*:*") != 0) {
      local = ZmqError("binding a ZeroMQ socket to an ephemeral TCP port");
    } else {
      char last[256] = {};
      size_t size = sizeof last;
      zmq_getsockopt(router, ZMQ_LAST_ENDPOINT, last, &size);
      const std::string bound(last);
      endpoint = "tcp://" + advertised + bound.substr(bound.rfind(':'));
    }
  }
  auto cleanup = [&] {
    if (router != nullptr) zmq_close(router);
    zmq_ctx_term(context);
  };
  Status agreed = AgreeOnStatus(coordinator, "cairn/emergency/zmq/bound", local, timeout);
  if (!agreed.ok()) {
    cleanup();
    return agreed;
  }
  auto all = coordinator.AllGather("cairn/emergency/zmq/endpoints", endpoint, timeout);
  if (!all.ok()) {
    cleanup();
    return all.status();
  }
  return std::shared_ptr<PeerTransport>(
      new ZmqTransport(context, router, coordinator.process_index(), std::move(*all)));
}

bool ZmqTransportAvailable() { return true; }

}  // namespace cairn::emergency

#else  // !CAIRN_HAVE_ZMQ

namespace cairn::emergency {

Result<std::shared_ptr<PeerTransport>> NewZmqTransport(Coordinator&, const std::string&, Coordinator::Duration) {
  return UnimplementedError("cairn was built without ZeroMQ (pkg-config found no libzmq)");
}

bool ZmqTransportAvailable() { return false; }

}  // namespace cairn::emergency

#endif
