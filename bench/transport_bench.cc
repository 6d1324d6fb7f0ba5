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
#include <openssl/evp.h>
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

constexpr size_t kChunk = size_t{16} << 20;
constexpr size_t kTag = 16;

// AES-256-GCM over `n` bytes from `in` to `out` (may be equal) under a fixed
// key and the nonce `chunk`; seals (writes `tag`) or opens (checks it).
bool Gcm(bool seal, uint64_t chunk, const uint8_t* in, uint8_t* out, size_t n, uint8_t tag[kTag]) {
  static const uint8_t key[32] = {7};
  uint8_t nonce[12] = {};
  std::memcpy(nonce + 4, &chunk, 8);
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  int len = 0;
  uint8_t tail[16];
  bool ok = ctx != nullptr && EVP_CipherInit_ex(ctx, EVP_aes_256_gcm(), nullptr, key, nonce, seal ? 1 : 0) == 1 &&
            EVP_CipherUpdate(ctx, out, &len, in, static_cast<int>(n)) == 1;
  if (ok && seal) {
    ok = EVP_CipherFinal_ex(ctx, tail, &len) == 1 && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, kTag, tag) == 1;
  } else if (ok) {
    ok = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, kTag, tag) == 1 && EVP_CipherFinal_ex(ctx, tail, &len) == 1;
  }
  EVP_CIPHER_CTX_free(ctx);
  return ok;
}

// `streams` copies at once of `data` over TCP into fresh files
// <dir>/floor<i>, each 16 MiB chunk sealed on the way out and opened on the
// way in when `sealed`: the floor of any (sealed) transfer on this machine.
double TcpFloor(const std::vector<char>& data, const fs::path& dir, int streams, bool sealed) {
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
  const size_t framed = sealed ? kChunk + kTag : kChunk;
  const auto t0 = Clock::now();
  for (int i = 0; i < streams; ++i) {
    threads.emplace_back([&, i] {
      const int c = accept(listeners[i], nullptr, nullptr);
      const int out = ::open((dir / ("floor" + std::to_string(i))).c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
      std::vector<uint8_t> buf(framed);
      for (off_t at = 0;;) {
        const ssize_t got = recv(c, buf.data(), buf.size(), MSG_WAITALL);
        if (got <= 0) break;
        size_t n = static_cast<size_t>(got);
        if (sealed) {
          if (n <= kTag) Die("a sealed chunk without its tag");
          n -= kTag;
          if (!Gcm(false, static_cast<uint64_t>(at) / kChunk, buf.data(), buf.data(), n, buf.data() + n)) {
            Die("a sealed chunk failed its check");
          }
        }
        if (pwrite(out, buf.data(), n, at) != static_cast<ssize_t>(n)) Die("writing the floor's file");
        at += static_cast<off_t>(n);
      }
      fsync(out);
      close(out);
      close(c);
    });
    threads.emplace_back([&, i] {
      const int s = socket(AF_INET, SOCK_STREAM, 0);
      if (connect(s, reinterpret_cast<const sockaddr*>(&addrs[i]), sizeof addrs[i]) != 0) Die("connecting");
      std::vector<uint8_t> buf(sealed ? framed : 0);
      for (size_t at = 0; at < data.size();) {
        const size_t n = std::min(kChunk, data.size() - at);
        const uint8_t* from = reinterpret_cast<const uint8_t*>(data.data()) + at;
        size_t size = n;
        if (sealed) {
          // Out of place, from the data into the send buffer: no copy
          // beyond the cipher's own pass.
          if (!Gcm(true, at / kChunk, from, buf.data(), n, buf.data() + n)) Die("sealing a chunk");
          from = buf.data();
          size = n + kTag;
        }
        for (size_t sent = 0; sent < size;) {
          const ssize_t k = send(s, from + sent, size - sent, 0);
          if (k <= 0) Die("sending");
          sent += static_cast<size_t>(k);
        }
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
  // Per case: cairn, the plain floor, the sealed floor (rounds).
  std::vector<double> both[3], one[3];
  std::printf("%zu MiB per process, %d rounds, in %s\n", bytes >> 20, rounds, dir.c_str());
  for (int r = 0; r < rounds; ++r) {
    both[0].push_back(Transfer(t, dir, {0, 1}, 2 * r, budget));
    both[1].push_back(TcpFloor(data, dir, 2, false));
    both[2].push_back(TcpFloor(data, dir, 2, true));
    one[0].push_back(Transfer(t, dir, {1}, 2 * r + 1, budget));
    one[1].push_back(TcpFloor(data, dir, 1, false));
    one[2].push_back(TcpFloor(data, dir, 1, true));
    std::printf("round %d: replication %.2f s (floor %.2f s, %.2fx; sealed floor %.2f s, %.2fx); "
                "fetch %.2f s (floor %.2f s, %.2fx; sealed floor %.2f s, %.2fx)\n",
                r, both[0].back(), both[1].back(), both[0].back() / both[1].back(), both[2].back(),
                both[0].back() / both[2].back(), one[0].back(), one[1].back(), one[0].back() / one[1].back(),
                one[2].back(), one[0].back() / one[2].back());
    std::fflush(stdout);
  }
  double load1[3] = {};
  getloadavg(load1, 3);
  const double gb = static_cast<double>(bytes) / 1e9;
  std::printf("\ncase | cairn (median) | plain TCP floor | sealed TCP floor | cairn / floor | cairn / sealed floor "
              "| sealed floor / floor\n");
  std::printf("-----|----------------|-----------------|------------------|---------------|----------------------"
              "|---------------------\n");
  auto row = [&](const char* name, const std::vector<double>* v, const char* per) {
    const double c = Median(v[0]), f = Median(v[1]), sf = Median(v[2]);
    std::printf("%s | %.2f s (%.2f GB/s%s) | %.2f s | %.2f s | %.2fx | %.2fx | %.2fx\n", name, c, gb / c, per, f, sf,
                c / f, c / sf, sf / f);
  };
  row("replication: 2 processes copy their step to each other at once", both, " per process");
  row("fetch: 1 process copies its step", one, "");
  std::printf("load average %.1f -> %.1f on %u cores\n", load0[0], load1[0], std::thread::hardware_concurrency());
  t.clear();
  fs::remove_all(dir);
  return 0;
}
