// `cairn demo`: the end-to-end demo on its embedded default, over the public
// C++ engine API (include/cairn/engine.h), as a trainer would use it.
//
//   1. Build a synthetic transformer training state (demo_state.h; 2 GiB by
//      default): bfloat16 parameters, float32 master weights, two Adam
//      moments.
//   2. Copy it once with memcpy (the yardstick for the save's stall) and
//      measure the device under the directory with a file of the same size
//      (demo_device.h).
//   3. Save it asynchronously as an Orbax checkpoint, in the shards 8
//      devices would hold (rows split 8 ways, vectors replicated): the stall
//      is the time until StartSaveCheckpoint returns, the save time until
//      Wait returns after the durable commit.
//   4. Evict the checkpoint from the page cache and restore it onto another
//      sharding (columns split 8 ways), then compare every byte.
//   5. Print the table; remove the directory unless the user named it.
//
// Ctrl-C or SIGTERM (signals.h) stops the demo at its next block, chunk or
// step: the scratch directory (a state's size twice over) is removed as at
// the end, and the exit status is 128 + the signal. A second signal ends
// the process at once.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <cstring>
#include <memory>
#include <thread>
#include <string>
#include <vector>

#include "cairn/coordinator.h"
#include "cairn/engine.h"
#include "cairn/options.h"
#include "cli_util.h"
#include "commands/commands.h"
#include "commands/demo_device.h"
#include "commands/demo_report.h"
#include "commands/demo_state.h"
#include "signals.h"

namespace cairn::cli {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

uint64_t DirectoryBytes(const fs::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec);
       !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

// Copies every array into fresh buffers, as a snapshot would.
double TimeMemcpy(const DemoState& st) {
  const auto t0 = Clock::now();
  std::vector<std::unique_ptr<uint8_t[]>> copies;
  copies.reserve(st.arrays.size());
  for (const DemoArray& a : st.arrays) {
    copies.emplace_back(new uint8_t[a.bytes]);
    std::memcpy(copies.back().get(), a.data.get(), a.bytes);
  }
  const double s = Since(t0);
  return s;
}

std::vector<CheckpointArray> SaveArrays(const DemoState& st) {
  std::vector<CheckpointArray> out;
  for (const DemoArray& a : st.arrays) {
    CheckpointArray c;
    c.path = a.path;
    c.dtype = a.dtype;
    c.shape = a.shape;
    const bool vector = a.shape.size() == 1;
    c.write_shape = SaveBox(a, 0).shape;
    c.num_replicas = vector ? kDemoDevices : 1;
    for (int d = 0; d < kDemoDevices; ++d) {
      const DemoBox box = SaveBox(a, d);
      const uint64_t offset = vector ? 0 : BoxBytes(a, box) * static_cast<uint64_t>(d);
      c.shards.push_back({box.origin, box.shape, a.data.get() + offset, vector ? d : 0});
    }
    out.push_back(std::move(c));
  }
  return out;
}

struct RestoreTargets {
  std::vector<RestoreArray> arrays;
  std::vector<std::unique_ptr<uint8_t[]>> buffers;  // per array, per device
};

RestoreTargets MakeRestoreTargets(const DemoState& st) {
  RestoreTargets t;
  for (const DemoArray& a : st.arrays) {
    RestoreArray r;
    r.path = a.path;
    r.dtype = a.dtype;
    for (int d = 0; d < kDemoDevices; ++d) {
      const DemoBox box = RestoreBox(a, d);
      t.buffers.emplace_back(new uint8_t[BoxBytes(a, box)]);
      r.boxes.push_back({box.origin, box.shape, t.buffers.back().get()});
    }
    t.arrays.push_back(std::move(r));
  }
  return t;
}

int RunDemo(const std::string& size_text, std::string dir, const std::string& compression) {
  const Result<uint64_t> parsed = ParseByteSize(size_text);
  const uint64_t target = parsed.ok() ? *parsed : 0;
  if (target < (uint64_t{1} << 20)) {
    std::fprintf(stderr, "cairn demo: --size `%s` is not a size of at least 1MiB (e.g. 2GiB, 64MiB)\n",
                 size_text.c_str());
    return 2;
  }
  const SignalInterrupt signals;
  const Interrupt* interrupt = signals.interrupt();
  const bool made_temp = dir.empty();
  std::string checkpoint;
  if (made_temp) {
    std::string tmpl = (fs::temp_directory_path() / "cairn-demo-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::perror("cairn demo: creating a scratch directory");
      return 1;
    }
    dir = tmpl;
  } else {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) {
      std::fprintf(stderr, "cairn demo: creating %s: %s\n", dir.c_str(), ec.message().c_str());
      return 1;
    }
  }
  checkpoint = (fs::absolute(dir) / "checkpoint").string();
  auto cleanup = [&] {
    std::error_code ec;
    if (made_temp) fs::remove_all(dir, ec);
  };
  // Removes the scratch directory, then reports `s` (an interruption as
  // such, with 128 + the signal).
  auto fail = [&](const std::string& what, const Status& s) {
    cleanup();
    if (WasInterrupted(s, interrupt)) {
      std::fprintf(stderr, "cairn demo: interrupted while %s; %s\n", what.c_str(),
                   made_temp ? ("removed " + dir).c_str() : ("nothing was committed in " + checkpoint).c_str());
      return signals.exit_code();
    }
    return PrintError("demo", what, s, 1);
  };

  auto t0 = Clock::now();
  DemoState st = MakeDemoState(target);
  const double make_s = Since(t0);
  if (Status s = CheckInterrupt(interrupt, "building the state"); !s.ok()) return fail("building the state", s);
  std::printf("cairn demo: a synthetic transformer training state of %.2f GiB (%zu arrays): %d layers,\n"
              "  d_model %lld, vocab %lld; bfloat16 parameters, float32 master weights, Adam mu and nu\n"
              "  (built in %.1f s). Saved as 8 devices hold it (matrices split by rows, vectors\n"
              "  replicated), restored onto another sharding (split by columns), compression=%s.\n"
              "  Checkpoint: %s; load average %s on %u cores.\n",
              st.bytes / double(1 << 30), st.arrays.size(), st.layers,
              static_cast<long long>(st.d_model), static_cast<long long>(st.vocab), make_s,
              compression.c_str(), checkpoint.c_str(), LoadAverage().c_str(),
              std::max(1u, std::thread::hardware_concurrency()));
  std::fflush(stdout);

  DemoTimings t;
  t.state_bytes = st.bytes;
  t.memcpy_seconds = TimeMemcpy(st);
  DeviceBandwidth dev;
  if (Status s = MeasureDevice(dir, st.bytes, &dev, interrupt); !s.ok()) {
    return fail("measuring the device under " + dir, s);
  }
  t.device_write_seconds = dev.write_seconds;
  t.device_read_seconds = dev.read_seconds;
  t.device_bytes = dev.bytes;
  t.device_method = dev.method;

  // Save: every device's shards from this one process.
  std::unique_ptr<Coordinator> coordinator = NewSingleProcessCoordinator();
  SaveCheckpointOptions options;
  options.compression = compression;
  options.interrupt = interrupt;
  {
    std::vector<CheckpointArray> arrays = SaveArrays(st);
    t0 = Clock::now();
    auto save = StartSaveCheckpoint(checkpoint, arrays, options, *coordinator);
    t.stall_seconds = Since(t0);
    Status s = save.ok() ? (*save)->Wait() : save.status();
    t.save_seconds = Since(t0);
    if (!s.ok()) return fail("saving " + checkpoint, s);
  }
  t.stored_bytes = DirectoryBytes(checkpoint);

  // Restore onto the other sharding, from the device.
  RestoreTargets targets = MakeRestoreTargets(st);
  EvictFromPageCache(checkpoint);
  t0 = Clock::now();
  RestoreOptions restore_options;
  restore_options.interrupt = interrupt;
  Result<RestoreStats> restored = RestoreCheckpoint(checkpoint, targets.arrays, restore_options);
  t.restore_seconds = Since(t0);
  if (!restored.ok()) return fail("restoring " + checkpoint, restored.status());
  size_t mismatches = 0;
  for (size_t i = 0; i < st.arrays.size(); ++i) {
    for (int d = 0; d < kDemoDevices; ++d) {
      if (!BoxEquals(st.arrays[i], RestoreBox(st.arrays[i], d), targets.buffers[i * kDemoDevices + d].get())) {
        ++mismatches;
        std::fprintf(stderr, "cairn demo: device %d's box of array %zu differs after the restore\n", d, i);
      }
    }
  }
  PrintDemoTable(t);
  cleanup();
  if (mismatches != 0) {
    std::printf("FAILED: %zu restored boxes differ from the saved state\n", mismatches);
    return 1;
  }
  std::printf("verified: all %zu arrays restored bit-exactly onto the other sharding%s\n",
              st.arrays.size(), made_temp ? "" : (" (checkpoint kept at " + checkpoint + ")").c_str());
  return 0;
}

}  // namespace

Command RegisterDemo(CLI::App& app) {
  struct Options {
    std::string size = "2GiB";
    std::string dir;
    std::string compression = "auto";
  };
  auto options = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "demo", "Save a synthetic transformer training state asynchronously as 8 devices hold it, "
              "restore it onto another sharding, verify it bit-exactly, and compare stall, save "
              "and restore throughput with the device's bandwidth measured in the same run");
  sub->add_option("--size", options->size, "State size, e.g. 2GiB, 64MiB, 500MB (default 2GiB)");
  sub->add_option("--directory", options->dir,
                  "Directory to save into (default: a temporary one, removed afterwards); the "
                  "checkpoint is kept at <directory>/checkpoint");
  sub->add_option("--compression", options->compression,
                  "default (Orbax's zstd), auto (zstd only where it saves 10%), or none "
                  "(default auto)")
      ->check(CLI::IsMember({"default", "auto", "none"}));
  return Command{sub, [options] { return RunDemo(options->size, options->dir, options->compression); }};
}

}  // namespace cairn::cli
