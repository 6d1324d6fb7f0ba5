// The crash campaign's emergency job (tests/crash/README in docs/TESTING.md):
// the 4-process job of src/cairn/emergency/testing/emergency_job.h, threads
// standing in for processes and an in-process network for the peer copies,
// run as one OS process so the campaign's LD_PRELOAD shim can kill it, tear
// its writes or cut its power at any file operation.
//
//   emergency_job save <root> <first> <last> <committed_log>
//     Every process saves steps first..last (local every step, persistent
//     every 5, 2 local steps kept, copies on 1 peer) and waits for each
//     step's background work (local write, replication, retention). The
//     processes go in lockstep, as a training job's collectives make them:
//     when all 4 have finished step s without error, s is appended to
//     <committed_log> (outside <root>): from then on the job has committed
//     it and no crash may lose it. When one failed, all stop. Exit 0; 1 when a save or wait failed
//     (the error is printed); 3 when the job hung past its deadline.
//   emergency_job restore <root>
//     Every process restores the latest step. Prints one JSON line
//     {"step": s, "tier": "local"|"persistent"|"none", "bit_exact": true,
//      "errors": [...]} and exits 0 when every process restored the same
//     step bit-exactly, 1 otherwise, 3 on a hang.
//   emergency_job expect <step>
//     Prints the whole state at <step> as one JSON line {"w": hex, "b": hex}
//     (float32 little-endian bytes), for checks by other readers (Orbax).
//   emergency_job leftovers <root>
//     Prints, one per line, every temporary directory below <root> (a name
//     containing ".orbax-checkpoint-tmp"), then exits 0.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cairn/emergency/testing/emergency_job.h"
#include "cairn/engine/testing/thread_coordinator.h"

namespace cairn::emergency {
namespace {

namespace fs = std::filesystem;
using testing::kProcesses;

constexpr auto kDeadline = std::chrono::seconds(45);

// Exits with 3 when `done` is not set within kDeadline (a hang is a defect
// the campaign reports, not a run it waits for).
class Watchdog {
 public:
  Watchdog() : thread_([this] {
    const auto end = std::chrono::steady_clock::now() + kDeadline;
    while (!done_.load()) {
      if (std::chrono::steady_clock::now() > end) {
        std::fprintf(stderr, "emergency_job: hung for %lld s\n", static_cast<long long>(kDeadline.count()));
        std::fflush(stderr);
        std::_Exit(3);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }) {}
  ~Watchdog() {
    done_ = true;
    thread_.join();
  }

 private:
  std::atomic<bool> done_{false};
  std::thread thread_;
};

EmergencyOptions Options(const std::string& root, int p) {
  EmergencyOptions o = testing::OptionsFor(root, p);
  o.save.timeout = std::chrono::seconds(20);
  return o;
}

void RunJob(const std::function<void(Coordinator&, std::shared_ptr<PeerTransport>, int)>& body) {
  testing::RunThreadJob(body);
}

// The training step's collectives: no process goes on to the next step
// before every process has finished this one, and when one failed all stop,
// as in a real job (whose gradient all-reduce never completes without it).
class Lockstep {
 public:
  // Blocks until every process arrived; whether all of them were ok.
  bool AllOk(bool ok) {
    std::unique_lock<std::mutex> lock(mu_);
    const int64_t round = round_;
    all_ok_ = all_ok_ && ok;
    if (++arrived_ == kProcesses) {
      result_ = all_ok_;
      arrived_ = 0;
      all_ok_ = true;
      ++round_;
      cv_.notify_all();
    } else {
      cv_.wait(lock, [&] { return round_ != round; });
    }
    return result_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  bool all_ok_ = true;
  bool result_ = true;
  int64_t round_ = 0;
};

int Save(const std::string& root, int64_t first, int64_t last, const std::string& committed_log) {
  std::mutex mu;
  std::vector<std::string> errors;
  Lockstep lockstep;
  Watchdog watchdog;
  RunJob([&](Coordinator& c, std::shared_ptr<PeerTransport> t, int p) {
    auto fail = [&](const std::string& what, const Status& s) {
      std::lock_guard<std::mutex> lock(mu);
      errors.push_back("process " + std::to_string(p) + " " + what + ": " + s.ToString());
      return false;
    };
    auto m = EmergencyCheckpointManager::Open(Options(root, p), c, t);
    if (!lockstep.AllOk(m.ok() || fail("open", m.status()))) return;
    for (int64_t step = first; step <= last; ++step) {
      const testing::JobState state = testing::StateAt(step);
      auto saved = (*m)->Save(step, testing::LeavesOf(state, p));
      bool ok = saved.ok() || fail("save of step " + std::to_string(step), saved.status());
      if (ok) {
        Status done = (*m)->WaitUntilFinished();
        ok = done.ok() || fail("step " + std::to_string(step), done);
      }
      if (!lockstep.AllOk(ok)) break;
      // Every process finished the step (save, replication, retention).
      if (p == 0) std::ofstream(committed_log, std::ios::app) << step << "\n" << std::flush;
    }
    Status closed = (*m)->Close();
    if (!closed.ok()) fail("close", closed);
  });
  for (const std::string& e : errors) std::fprintf(stderr, "%s\n", e.c_str());
  return errors.empty() ? 0 : 1;
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (static_cast<unsigned char>(ch) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", ch);
      out += buf;
      continue;
    }
    out += ch;
  }
  return out + "\"";
}

int Restore(const std::string& root) {
  std::mutex mu;
  std::vector<std::string> errors;
  std::map<int, std::pair<int64_t, StepChoice::Tier>> got;
  bool exact = true;
  {
    Watchdog watchdog;
    RunJob([&](Coordinator& c, std::shared_ptr<PeerTransport> t, int p) {
      auto m = EmergencyCheckpointManager::Open(Options(root, p), c, t);
      if (!m.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        errors.push_back("process " + std::to_string(p) + " open: " + m.status().ToString());
        return;
      }
      testing::Restored out;
      auto report = (*m)->RestoreStep(std::nullopt, testing::RequestOf(out, p));
      std::lock_guard<std::mutex> lock(mu);
      if (!report.ok()) {
        errors.push_back("process " + std::to_string(p) + " restore: " + report.status().ToString());
        return;
      }
      got[p] = {report->step, report->tier};
      if (report->tier != StepChoice::Tier::kNone && !testing::BitExact(out, p, report->step)) {
        exact = false;
        errors.push_back("process " + std::to_string(p) + ": step " + std::to_string(report->step) +
                         " is not bit-exact");
      }
      (*m)->Close().IgnoreError();
    });
  }
  int64_t step = -1;
  std::string tier = "none";
  for (const auto& [p, v] : got) {
    if (p != got.begin()->first && v.first != step) errors.push_back("processes restored different steps");
    step = v.first;
    tier = v.second == StepChoice::Tier::kLocal ? "local" : v.second == StepChoice::Tier::kPersistent ? "persistent"
                                                                                                       : "none";
  }
  if (static_cast<int>(got.size()) != kProcesses && errors.empty()) errors.push_back("a process did not report");
  std::string line = "{\"step\": " + std::to_string(step) + ", \"tier\": \"" + tier +
                     "\", \"bit_exact\": " + (exact ? "true" : "false") + ", \"errors\": [";
  for (size_t i = 0; i < errors.size(); ++i) line += (i ? ", " : "") + JsonString(errors[i]);
  std::printf("%s]}\n", line.c_str());
  return errors.empty() ? 0 : 1;
}

int Leftovers(const std::string& root) {
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(root, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (it->path().filename().string().find(".orbax-checkpoint-tmp") != std::string::npos) {
      std::printf("%s\n", it->path().string().c_str());
    }
  }
  return 0;
}

int Expect(int64_t step) {
  const testing::JobState state = testing::StateAt(step);
  auto hex = [](const std::vector<uint8_t>& bytes) {
    std::string out;
    char buf[3];
    for (uint8_t b : bytes) {
      std::snprintf(buf, sizeof(buf), "%02x", b);
      out += buf;
    }
    return out;
  };
  std::printf("{\"w\": \"%s\", \"b\": \"%s\"}\n", hex(state.w).c_str(), hex(state.b).c_str());
  return 0;
}

int Usage() {
  std::fprintf(stderr,
               "usage: emergency_job save <root> <first> <last> <committed_log>\n"
               "       emergency_job restore <root>\n"
               "       emergency_job expect <step>\n"
               "       emergency_job leftovers <root>\n");
  return 2;
}

}  // namespace
}  // namespace cairn::emergency

int main(int argc, char** argv) {
  using namespace cairn::emergency;
  if (argc < 3) return Usage();
  const std::string mode = argv[1];
  if (mode == "save" && argc == 6) return Save(argv[2], std::atoll(argv[3]), std::atoll(argv[4]), argv[5]);
  if (mode == "restore" && argc == 3) return Restore(argv[2]);
  if (mode == "leftovers" && argc == 3) return Leftovers(argv[2]);
  if (mode == "expect" && argc == 3) return Expect(std::atoll(argv[2]));
  return Usage();
}
