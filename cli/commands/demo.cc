// `cairn demo`: the end-to-end demo on its embedded default.
//
// Writes one bfloat16 array in several codec chains (zarr v3 and v2, raw,
// zstd, gzip, blosc, sharded with crc32c) to a scratch directory, reads each
// back, checks every byte, and prints stored sizes and throughputs. Later
// issues grow it into save -> convert -> restore.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cairn/dtype/dtype.h"
#include "cairn/kvstore/url.h"
#include "cairn/util/json.h"
#include "cairn/zarr/array.h"
#include "commands/commands.h"

namespace cairn::cli {
namespace {

struct Variant {
  const char* name;
  ZarrFormat format;
  const char* metadata;  // JSON; shape/dtype/chunks filled in below
};

// Element values: a smooth signal plus noise, so codecs have something to do.
Buffer MakeBFloat16Data(Index rows, Index cols) {
  Buffer b(static_cast<size_t>(rows * cols) * 2);
  std::mt19937 rng(42);
  std::normal_distribution<float> noise(0.f, 0.05f);
  auto* out = reinterpret_cast<uint16_t*>(b.data());
  for (Index r = 0; r < rows; ++r) {
    for (Index c = 0; c < cols; ++c) {
      float v = std::sin(0.001f * static_cast<float>(c)) * std::cos(0.01f * static_cast<float>(r)) + noise(rng);
      uint32_t bits;
      std::memcpy(&bits, &v, 4);
      bits += 0x7fff + ((bits >> 16) & 1);  // round to nearest even
      out[r * cols + c] = static_cast<uint16_t>(bits >> 16);
    }
  }
  return b;
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

uint64_t DirectoryBytes(const std::filesystem::path& dir) {
  uint64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    if (it->is_regular_file(ec)) total += it->file_size(ec);
  }
  return total;
}

}  // namespace

// Runs the demo in `dir` (a fresh temporary directory when empty) on an array
// of `mib` MiB. Returns the process exit status.
int RunDemo(std::string dir, int mib, bool keep) {
  if (mib < 1 || mib > (1 << 16)) {
    std::fprintf(stderr, "cairn demo: --mib must be between 1 and 65536, got %d\n", mib);
    return 2;
  }
  namespace fs = std::filesystem;
  bool made_temp = dir.empty();
  if (made_temp) {
    std::string tmpl = (fs::temp_directory_path() / "cairn-demo-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::perror("cairn demo: creating a scratch directory");
      return 1;
    }
    dir = tmpl;
  }
  const Index cols = 8192;
  const Index rows = std::max<Index>(64, (static_cast<Index>(mib) << 20) / (cols * 2));
  const Index chunk_rows = 512;
  Buffer data = MakeBFloat16Data(rows, cols);
  const double gb = static_cast<double>(data.size()) / 1e9;

  const Variant variants[] = {
      {"v3 raw", ZarrFormat::kV3,
       R"({"codecs":[{"name":"bytes","configuration":{"endian":"little"}}]})"},
      {"v3 zstd-1", ZarrFormat::kV3,
       R"({"codecs":[{"name":"bytes","configuration":{"endian":"little"}},)"
       R"({"name":"zstd","configuration":{"level":1,"checksum":true}}]})"},
      {"v3 gzip-1", ZarrFormat::kV3,
       R"({"codecs":[{"name":"bytes","configuration":{"endian":"little"}},)"
       R"({"name":"gzip","configuration":{"level":1}}]})"},
      {"v3 blosc-lz4", ZarrFormat::kV3,
       R"({"codecs":[{"name":"bytes","configuration":{"endian":"little"}},)"
       R"({"name":"blosc","configuration":{"cname":"lz4","clevel":5,"shuffle":"shuffle",)"
       R"("typesize":2,"blocksize":0}}]})"},
      {"v3 sharded zstd-3+crc32c", ZarrFormat::kV3,
       R"({"codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[128,8192],)"
       R"("codecs":[{"name":"bytes","configuration":{"endian":"little"}},)"
       R"({"name":"zstd","configuration":{"level":3,"checksum":false}},{"name":"crc32c"}],)"
       R"("index_codecs":[{"name":"bytes","configuration":{"endian":"little"}},)"
       R"({"name":"crc32c"}]}}]})"},
      {"v2 zstd-1", ZarrFormat::kV2, R"({"compressor":{"id":"zstd","level":1}})"},
  };

  auto store = OpenKvStore("file://" + dir + "/");
  if (!store.ok()) {
    std::fprintf(stderr, "cairn demo: %s\n", store.status().ToString().c_str());
    return 1;
  }
  std::printf("cairn demo: bfloat16 [%lld, %lld] (%.1f MB) in [%lld, %lld] chunks, under %s\n",
              static_cast<long long>(rows), static_cast<long long>(cols), gb * 1e3,
              static_cast<long long>(chunk_rows), static_cast<long long>(cols), dir.c_str());
  std::printf("%-26s %12s %8s %12s %12s %s\n", "variant", "stored MB", "ratio", "write GB/s",
              "read GB/s", "check");
  int failures = 0;
  int i = 0;
  for (const Variant& v : variants) {
    Json md = Json::parse(v.metadata);
    md["shape"] = {rows, cols};
    if (v.format == ZarrFormat::kV3) {
      md["data_type"] = "bfloat16";
      md["chunk_grid"] = {{"name", "regular"},
                          {"configuration", {{"chunk_shape", {chunk_rows, cols}}}}};
    } else {
      md["dtype"] = "bfloat16";
      md["chunks"] = {chunk_rows, cols};
    }
    std::string prefix = "array" + std::to_string(i++) + "/";
    Box box = Box::FromShape({rows, cols});
    auto t0 = std::chrono::steady_clock::now();
    auto array = ZarrArray::Create(*store, prefix, v.format, md);
    Status st = array.ok() ? (*array)->Write(box, data.data()) : array.status();
    double write_s = Seconds(t0);
    Buffer back(data.size());
    double read_s = 0;
    if (st.ok()) {
      t0 = std::chrono::steady_clock::now();
      auto reopened = ZarrArray::Open(*store, prefix);
      st = reopened.ok() ? (*reopened)->Read(box, back.data()) : reopened.status();
      read_s = Seconds(t0);
    }
    if (!st.ok()) {
      std::printf("%-26s failed: %s\n", v.name, st.ToString().c_str());
      ++failures;
      continue;
    }
    bool same = back == data;
    failures += same ? 0 : 1;
    uint64_t stored = DirectoryBytes(fs::path(dir) / prefix);
    std::printf("%-26s %12.1f %8.3f %12.2f %12.2f %s\n", v.name, stored / 1e6,
                static_cast<double>(stored) / static_cast<double>(data.size()), gb / write_s,
                gb / read_s, same ? "bit-exact" : "MISMATCH");
  }
  if (made_temp && !keep) {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::printf(failures == 0 ? "all variants round-tripped bit-exactly\n"
                            : "%d variant(s) failed\n", failures);
  return failures == 0 ? 0 : 1;
}

Command RegisterDemo(CLI::App& app) {
  struct Options {
    std::string dir;
    int mib = 256;
    bool keep = false;
  };
  auto options = std::make_shared<Options>();
  CLI::App* sub = app.add_subcommand(
      "demo", "Write a bfloat16 array in several zarr codec chains, read each back, check it "
              "bit-exactly, and print stored sizes and throughputs");
  sub->add_option("--dir", options->dir, "Directory to write into (default: a temporary one)");
  sub->add_option("--mib", options->mib, "Array size in MiB (default 256)");
  sub->add_flag("--keep", options->keep, "Keep the temporary directory");
  return Command{sub, [options] { return RunDemo(options->dir, options->mib, options->keep); }};
}

}  // namespace cairn::cli
