// The emergency checkpoints' peer replication at the transport level: two
// processes (threads with a ZeroMQ transport each, on 127.0.0.1) copy a
// step directory of --bytes to each other at once (SendDirectory /
// ReceiveDirectory, as a replication does: sealed pieces, checksums, the
// file written in place on the RAM disk), and one copies its step alone (a
// lost host's fetch). Each is measured against its floor in the same round:
// the same bytes over plain TCP sockets, sent from memory and written into
// fresh files in the same directory, as many streams at once.
//
// Built on demand (not by the test build):
//   ninja -C build/release cairn_transport_bench
//   build/release/cairn_transport_bench [--bytes 536870912] [--rounds 5] [--dir /dev/shm]
// Prints each round and the medians with the load average (machines are
// shared: quote the ratios).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "cairn/emergency/dir_transfer.h"
#include "cairn/emergency/zmq_transport.h"
#include "cairn/engine/byte_budget.h"
#include "cairn/engine/testing/thread_coordinator.h"
#include "cairn/layout/orbax/location.h"

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace cairn;
using namespace cairn::emergency;

namespace {

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "transport_bench: %s\n", what.c_str());
  std::exit(1);
}

// `streams` copies at once of `data` over plain TCP into fresh files
// <dir>/floor<i>: the floor of any transfer on this machine.
double PlainTcpFloor(const std::vector<char>& data, const fs::path& dir, int streams) {
  std::vector<std::thread> threads;
  std::vector<int> listeners;
  std::vector<sockaddr_in> addrs(streams);
  for (int i = 0; i < streams; ++i) {
    fs::remove(dir / ("floor" + std::to_string(i)));
    int l = socket(AF_INET, SOCK_STREAM, 0);
    addrs[i].sin_family = AF_INET;
    inet_pton(AF_INET, "127.0.0.1", &addrs[i].sin_addr);
    socklen_t len = sizeof addrs[i];
    if (bind(l, reinterpret_cast<sockaddr*>(&addrs[i]), len) != 0 || listen(l, 1) != 0 ||
        getsockname(l, reinterpret_cast<sockaddr*>(&addrs[i]), &len) != 0) {
      Die("listening on 127.0.0.1");
    }
    listeners.push_back(l);
  }
  const auto t0 = Clock::now();
  for (int i = 0; i < streams; ++i) {
    threads.emplace_back([&, i] {
      const int c = accept(listeners[i], nullptr, nullptr);
      const int out = ::open((dir / ("floor" + std::to_string(i))).c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
      std::vector<char> buf(16 << 20);
      for (off_t at = 0;;) {
        const ssize_t n = recv(c, buf.data(), buf.size(), MSG_WAITALL);
        if (n <= 0) break;
        if (pwrite(out, buf.data(), n, at) != n) Die("writing the floor's file");
        at += n;
      }
      fsync(out);
      close(out);
      close(c);
    });
    threads.emplace_back([&, i] {
      const int s = socket(AF_INET, SOCK_STREAM, 0);
      if (connect(s, reinterpret_cast<const sockaddr*>(&addrs[i]), sizeof addrs[i]) != 0) Die("connecting");
      for (size_t at = 0; at < data.size();) {
        const ssize_t n = send(s, data.data() + at, std::min<size_t>(16 << 20, data.size() - at), 0);
        if (n <= 0) Die("sending");
        at += n;
      }
      close(s);
    });
  }
  for (std::thread& t : threads) t.join();
  const double s = Since(t0);
  for (int l : listeners) close(l);
  return s;
}

// Process p sends its step to process 1 - p, for each p in `senders`, all
// at once; returns the seconds until every receiver has published its copy.
double Transfer(std::vector<std::shared_ptr<PeerTransport>>& t, const fs::path& dir, const std::vector<int>& senders,
                int tag, engine::ByteBudget& budget) {
  TransferOptions options;
  options.budget = &budget;
  options.timeout = std::chrono::minutes(5);
  std::vector<std::thread> threads;
  std::vector<Status> status(2 * senders.size());
  for (int p : senders) fs::remove_all(dir / ("copy" + std::to_string(p)));
  const auto t0 = Clock::now();
  for (size_t k = 0; k < senders.size(); ++k) {
    const int p = senders[k];
    const std::string name = "step of process " + std::to_string(p);
    threads.emplace_back([&, p, k, name] {
      auto src = orbax::OpenLocation((dir / ("step" + std::to_string(p))).string());
      status[2 * k] = src.ok() ? SendDirectory(*t[p], 1 - p, tag, name, *src, Status::OK(), options).status()
                               : src.status();
    });
    threads.emplace_back([&, p, k, name] {
      auto dst = orbax::OpenLocation((dir / ("copy" + std::to_string(p))).string());
      status[2 * k + 1] =
          dst.ok() ? ReceiveDirectory(*t[1 - p], p, tag, name, *dst, options).status() : dst.status();
    });
  }
  for (std::thread& th : threads) th.join();
  const double s = Since(t0);
  for (const Status& st : status) {
    if (!st.ok()) Die(st.ToString());
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  size_t bytes = size_t{512} << 20;
  int rounds = 5;
  fs::path base = "/dev/shm";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--bytes") bytes = std::stoull(argv[i + 1]);
    else if (a == "--rounds") rounds = std::max(1, std::atoi(argv[i + 1]));
    else if (a == "--dir") base = argv[i + 1];
    else Die("unknown option " + a + " (--bytes N, --rounds N, --dir PATH)");
  }
  const fs::path dir = base / ("cairn-transport-bench-" + std::to_string(getpid()));
  fs::create_directories(dir);
  std::vector<char> data(bytes);
  for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<char>(i * 131 + (i >> 20));
  for (int p = 0; p < 2; ++p) {
    const fs::path step = dir / ("step" + std::to_string(p));
    fs::create_directories(step / "state");
    std::ofstream(step / "_CHECKPOINT_METADATA") << "{\"process\": " << p << "}";
    std::ofstream(step / "commit_success.txt") << "done";
    std::ofstream(step / "state" / "w", std::ios::binary).write(data.data(), static_cast<std::streamsize>(bytes));
  }
  engine::testing::ThreadGroup group(2);
  std::vector<std::shared_ptr<PeerTransport>> t(2);
  {
    std::vector<std::thread> opening;
    for (int p = 0; p < 2; ++p) {
      opening.emplace_back([&, p] {
        auto opened = NewZmqTransport(group.Member(p), "127.0.0.1", std::chrono::seconds(30));
        if (!opened.ok()) Die(opened.status().ToString());
        t[p] = *opened;
      });
    }
    for (std::thread& th : opening) th.join();
  }
  engine::ByteBudget budget(uint64_t{1} << 30);
  double load0[3] = {};
  getloadavg(load0, 3);
  std::vector<double> both, both_floor, one, one_floor;
  std::printf("%zu MiB per process, %d rounds, in %s\n", bytes >> 20, rounds, dir.c_str());
  for (int r = 0; r < rounds; ++r) {
    both.push_back(Transfer(t, dir, {0, 1}, 2 * r, budget));
    both_floor.push_back(PlainTcpFloor(data, dir, 2));
    one.push_back(Transfer(t, dir, {1}, 2 * r + 1, budget));
    one_floor.push_back(PlainTcpFloor(data, dir, 1));
    std::printf("round %d: replication %.2f s (floor %.2f s, %.2fx); fetch %.2f s (floor %.2f s, %.2fx)\n", r,
                both.back(), both_floor.back(), both.back() / both_floor.back(), one.back(), one_floor.back(),
                one.back() / one_floor.back());
    std::fflush(stdout);
  }
  double load1[3] = {};
  getloadavg(load1, 3);
  const double gb = static_cast<double>(bytes) / 1e9;
  std::printf("\ncase | cairn (median) | plain TCP floor (median) | cairn / floor\n");
  std::printf("-----|----------------|--------------------------|--------------\n");
  std::printf("replication: 2 processes copy their step to each other at once | %.2f s (%.2f GB/s per process) | "
              "%.2f s | %.2fx\n",
              Median(both), gb / Median(both), Median(both_floor), Median(both) / Median(both_floor));
  std::printf("fetch: 1 process copies its step | %.2f s (%.2f GB/s) | %.2f s | %.2fx\n", Median(one),
              gb / Median(one), Median(one_floor), Median(one) / Median(one_floor));
  std::printf("load average %.1f -> %.1f on %u cores\n", load0[0], load1[0], std::thread::hardware_concurrency());
  t.clear();
  fs::remove_all(dir);
  return 0;
}
