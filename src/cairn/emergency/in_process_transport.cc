// InProcessNetwork (transport.h): mailboxes keyed by (sender, receiver, tag).
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "cairn/emergency/transport.h"

namespace cairn::emergency {

struct InProcessNetwork::State {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::tuple<int, int, int>, std::deque<Buffer>> mailboxes;
};

namespace {

class InProcessEndpoint final : public PeerTransport {
 public:
  InProcessEndpoint(std::shared_ptr<InProcessNetwork::State> state, int index, int count)
      : state_(std::move(state)), index_(index), count_(count) {}
  int process_index() const override { return index_; }
  int process_count() const override { return count_; }

  Status Send(int dest, int tag, ByteView bytes, Duration) override {
    if (dest < 0 || dest >= count_) return InvalidArgumentError("send to process " + std::to_string(dest) + ": no such process");
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->mailboxes[{index_, dest, tag}].push_back(Buffer::CopyOf(bytes));
    state_->cv.notify_all();
    return Status::OK();
  }

  Expectation Expect(int, int) override { return Expectation(); }  // queues whatever arrives
  Result<Buffer> Receive(int source, int tag, size_t max_bytes, Duration timeout) override {
    std::unique_lock<std::mutex> lock(state_->mu);
    auto& box = state_->mailboxes[{source, index_, tag}];
    if (!state_->cv.wait_for(lock, timeout, [&] { return !box.empty(); })) {
      return UnavailableError("no message from process " + std::to_string(source) + " (tag " +
                              std::to_string(tag) + ") in time");
    }
    Buffer b = std::move(box.front());
    box.pop_front();
    if (b.size() > max_bytes) {
      return ResourceExhaustedError("a message of " + std::to_string(b.size()) + " bytes from process " +
                                    std::to_string(source) + " exceeds " + std::to_string(max_bytes));
    }
    return b;
  }

 private:
  std::shared_ptr<InProcessNetwork::State> state_;
  int index_, count_;
};

}  // namespace

InProcessNetwork::InProcessNetwork(int count) : state_(std::make_shared<State>()), count_(count) {}
InProcessNetwork::~InProcessNetwork() = default;

std::shared_ptr<PeerTransport> InProcessNetwork::Endpoint(int index) {
  return std::make_shared<InProcessEndpoint>(state_, index, count_);
}

}  // namespace cairn::emergency
