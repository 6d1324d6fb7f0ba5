// Per-request overhead of the HttpClient, seen from a small HTTP/1.1 server
// in this test that records what arrives: a large PUT carries no
// `Expect: 100-continue` (which costs a round trip, or a one-second wait on
// servers that ignore it), and calls one after the other reuse one kept-alive
// connection instead of connecting each time. Controls: the same server sees
// the request's own headers and body, and a server that closes after each
// answer gets a new connection per call. And while calls wait for room
// (more queued than max_in_flight), the transfer thread sleeps in its poll
// instead of spinning; control: the queued calls still all run, one at a
// time. A batch of calls in flight at once leaves all its connections in the
// pool for the next batch, however one by one its answers come. And choosing
// which queued call starts next looks at each call a few times, not at the
// whole queue on every turn (which made a batch of N calls O(N^2)).
#include "cairn/kvstore/http/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cairn::http {
namespace {

// Answers every request 200 with an empty body; records each request's head
// (lower-cased) and the body sizes; counts accepted connections.
class RecordingServer {
 public:
  // `answer_delay`: how long each request is held before its answer.
  // `answer_in_groups_of` > 0: requests are answered in groups of that many,
  // each held until the whole group has arrived (at most 20 s), so that a
  // group is on the wire at once whatever the machine's load; then the i-th
  // of the group to arrive waits i * `answer_delay` more, so that the
  // answers come one by one.
  explicit RecordingServer(bool close_after_each,
                           std::chrono::milliseconds answer_delay = std::chrono::milliseconds(0),
                           int answer_in_groups_of = 0)
      : close_after_each_(close_after_each),
        answer_delay_(answer_delay),
        group_(answer_in_groups_of) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;  // a free port
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(listen(listen_fd_, 128), 0);
    socklen_t len = sizeof addr;
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }
  ~RecordingServer() {
    stopping_ = true;
    shutdown(listen_fd_, SHUT_RDWR);
    close(listen_fd_);
    acceptor_.join();
    for (auto& t : connections_) t.join();
  }
  std::string url(std::string_view path) const {
    return "http://127.0.0.1:" + std::to_string(port_) + std::string(path);
  }
  int connections() const { return accepted_.load(); }
  // The most requests ever held at once (received, not yet answered).
  int max_concurrent() const { return max_concurrent_.load(); }
  std::vector<std::string> heads() {
    std::lock_guard<std::mutex> lock(mu_);
    return heads_;
  }
  std::vector<size_t> bodies() {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }

 private:
  void AcceptLoop() {
    while (!stopping_) {
      int fd = accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      ++accepted_;
      connections_.emplace_back([this, fd] { Serve(fd); });
    }
  }

  void Serve(int fd) {
    std::string in;
    char buf[65536];
    for (;;) {
      size_t end;
      while ((end = in.find("\r\n\r\n")) == std::string::npos) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) return close(fd), void();
        in.append(buf, static_cast<size_t>(n));
      }
      std::string head = in.substr(0, end);
      in.erase(0, end + 4);
      for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      size_t length = 0;
      if (size_t at = head.find("content-length:"); at != std::string::npos) {
        length = std::stoul(head.substr(at + 15));
      }
      while (in.size() < length) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) return close(fd), void();
        in.append(buf, static_cast<size_t>(n));
      }
      in.erase(0, length);
      std::chrono::milliseconds delay = answer_delay_;
      {
        std::unique_lock<std::mutex> lock(mu_);
        heads_.push_back(head);
        bodies_.push_back(length);
        max_concurrent_ = std::max(max_concurrent_.load(), ++held_);
        if (group_ > 0) {
          const size_t position = (heads_.size() - 1) % group_;
          const size_t complete = heads_.size() - position + group_ - 1;
          arrived_.notify_all();
          arrived_.wait_for(lock, std::chrono::seconds(20),
                            [&] { return heads_.size() >= complete; });
          delay *= static_cast<int>(position);
        }
      }
      std::this_thread::sleep_for(delay);
      {
        std::lock_guard<std::mutex> lock(mu_);
        --held_;
      }
      std::string answer = close_after_each_
                               ? "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                               : "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
      if (write(fd, answer.data(), answer.size()) != static_cast<ssize_t>(answer.size()) ||
          close_after_each_) {
        close(fd);
        return;
      }
    }
  }

  const bool close_after_each_;
  const std::chrono::milliseconds answer_delay_;
  const size_t group_;
  std::condition_variable arrived_;
  int held_ = 0;  // guarded by mu_
  std::atomic<int> max_concurrent_{0};
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<int> accepted_{0};
  std::thread acceptor_;
  std::vector<std::thread> connections_;  // acceptor thread only, then the destructor
  std::mutex mu_;
  std::vector<std::string> heads_;
  std::vector<size_t> bodies_;
};

HttpCall Put(const std::string& url, ByteView body) {
  HttpCall call;
  call.request.method = "PUT";
  call.request.url = url;
  call.request.body = body;
  call.request.headers = {"x-test: yes"};
  call.operation = "test put";
  return call;
}

TEST(HttpClientOverhead, LargePutSendsNoExpectAndReusesTheConnection) {
  RecordingServer server(/*close_after_each=*/false);
  HttpClientOptions options;
  options.max_in_flight = 1;
  HttpClient client(options);
  const std::string big(4 << 20, 'x');  // curl would ask to continue for this
  for (int i = 0; i < 5; ++i) {
    auto r = client.Execute(Put(server.url("/k" + std::to_string(i)), AsBytes(big)));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 200);
  }
  auto heads = server.heads();
  ASSERT_EQ(heads.size(), 5u);
  for (const std::string& head : heads) {
    EXPECT_EQ(head.find("expect:"), std::string::npos) << head;
    EXPECT_EQ(head.find("100-continue"), std::string::npos) << head;
    EXPECT_NE(head.find("x-test: yes"), std::string::npos) << head;  // control: headers arrive
    EXPECT_EQ(head.rfind("put /k", 0), 0u) << head;
  }
  for (size_t n : server.bodies()) EXPECT_EQ(n, big.size());
  EXPECT_EQ(server.connections(), 1);  // kept alive across the calls
}

TEST(HttpClientOverhead, ServerThatClosesGetsANewConnectionPerCall) {
  RecordingServer server(/*close_after_each=*/true);
  HttpClientOptions options;
  options.max_in_flight = 1;
  HttpClient client(options);
  for (int i = 0; i < 3; ++i) {
    auto r = client.Execute(Put(server.url("/k"), AsBytes("small")));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 200);
  }
  EXPECT_EQ(server.connections(), 3);
  EXPECT_EQ(server.heads().size(), 3u);
}

TEST(HttpClientOverhead, QueuedCallsDoNotMakeTheTransferThreadSpin) {
  // Four calls, one in flight, each answered after 200 ms: three wait for
  // room for most of 0.8 s. A loop that polls with a zero timeout while they
  // wait goes round hundreds of thousands of times (and takes a core from
  // the server and the caller); one that sleeps until a transfer needs it
  // goes round a few times per call (socket events, the 100 ms cap).
  RecordingServer server(/*close_after_each=*/false, std::chrono::milliseconds(200));
  HttpClientOptions options;
  options.max_in_flight = 1;
  HttpClient client(options);
  std::vector<HttpCall> calls;
  for (int i = 0; i < 4; ++i) calls.push_back(Put(server.url("/q" + std::to_string(i)), AsBytes("v")));
  const uint64_t before = client.loop_iterations();
  std::vector<Result<HttpResponse>> results = client.ExecuteAll(std::move(calls));
  const uint64_t iterations = client.loop_iterations() - before;
  // Control: every queued call ran, one at a time, and the loop did go round.
  ASSERT_EQ(results.size(), 4u);
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 200);
  }
  EXPECT_EQ(server.heads().size(), 4u);
  EXPECT_EQ(server.max_concurrent(), 1);
  EXPECT_GE(iterations, 4u);
  // The bound: 4 calls x (a few socket events + 2 capped timeouts), with
  // plenty of room; a spinning loop exceeds it within milliseconds.
  EXPECT_LT(iterations, 400u) << "the transfer thread spun while calls waited for room";
}

TEST(HttpClientOverhead, QueuedCallsAreNotScannedOnEveryTurn) {
  // 1,000 calls, one in flight: 999 wait in the queue. The transfer thread
  // goes round its loop at least once per call; when each turn looked at
  // every queued call (to find one due to start and the next retry time),
  // the batch cost about N^2 / 2 = 500,000 looks. Starting calls in order
  // from the front of a queue, with retries apart in order of their time,
  // looks at each call a small constant number of times.
  RecordingServer server(/*close_after_each=*/false);
  HttpClientOptions options;
  options.max_in_flight = 1;
  HttpClient client(options);
  constexpr int kCalls = 1000;
  std::vector<HttpCall> calls;
  for (int i = 0; i < kCalls; ++i) calls.push_back(Put(server.url("/n" + std::to_string(i)), AsBytes("v")));
  const uint64_t before = client.queue_visits();
  std::vector<Result<HttpResponse>> results = client.ExecuteAll(std::move(calls));
  const uint64_t visits = client.queue_visits() - before;
  // Control: every call ran, one at a time, in the order given.
  ASSERT_EQ(results.size(), static_cast<size_t>(kCalls));
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 200);
  }
  auto heads = server.heads();
  ASSERT_EQ(heads.size(), static_cast<size_t>(kCalls));
  EXPECT_EQ(heads.front().rfind("put /n0 ", 0), 0u) << heads.front();
  EXPECT_EQ(heads.back().rfind("put /n999 ", 0), 0u) << heads.back();
  EXPECT_EQ(server.max_concurrent(), 1);
  EXPECT_GE(visits, static_cast<uint64_t>(kCalls));  // each call was taken from the queue
  EXPECT_LT(visits, static_cast<uint64_t>(4 * kCalls)) << "queued calls were scanned on every turn";
}

TEST(HttpClientOverhead, ConnectionsOfAFullBatchAreKeptForTheNextBatch) {
  // Two batches of 16 calls at 16 in flight, each call held by the server
  // until all 16 of its batch have arrived (so they are on the wire at
  // once, over 16 connections: the control below), then answered one by
  // one, 20 ms apart. The first batch opens 16 connections; the second must
  // find them all in the pool. libcurl's default pool keeps 4 idle
  // connections per transfer still running, so as a batch drained one
  // answer at a time it closed all but a few, and the next batch connected
  // again.
  RecordingServer server(/*close_after_each=*/false, std::chrono::milliseconds(20),
                         /*answer_in_groups_of=*/16);
  HttpClientOptions options;
  options.max_in_flight = 16;
  HttpClient client(options);
  for (int batch = 0; batch < 2; ++batch) {
    std::vector<HttpCall> calls;
    for (int i = 0; i < 16; ++i) calls.push_back(Put(server.url("/b" + std::to_string(i)), AsBytes("v")));
    for (const auto& r : client.ExecuteAll(std::move(calls))) {
      ASSERT_TRUE(r.ok()) << r.status().ToString();
      EXPECT_EQ(r->status, 200);
    }
    // Control: the batch did run 16 at once, each on a connection of its own.
    EXPECT_EQ(server.max_concurrent(), 16);
    EXPECT_EQ(server.connections(), 16) << "batch " << batch;
  }
  EXPECT_EQ(server.heads().size(), 32u);
}

}  // namespace
}  // namespace cairn::http
