// `cairn verify CKPT [--json]`: reads every chunk of every array of a
// checkpoint of any format. AXLearn and safetensors go through the
// checkpoint-format interface (CheckpointReader::VerifyStored: each zarr
// chunk through the zarr layer's check, naming its key and URL; safetensors
// read through in full). An Orbax
// checkpoint (root: every finalized step; step; item), checking every
// checksum (zstd frames, crc32c codecs, shard indexes, OCDBT manifest and
// nodes), that every expected chunk exists, that OCDBT data files are long
// enough for every reference, that `_METADATA` is there and parses, and
// that no uncommitted tmp directory is left (inspect/verify.h).
//
// Prints one line per problem (kind, array, key, file, message) and exits 1
// when there is any; 0 when all is well; 2 when CKPT is no checkpoint.
// `--json` prints the report as one object. A progress bar on a terminal.
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cairn/layout/inspect/checkpoint.h"
#include "cairn/layout/inspect/verify.h"
#include "cli_util.h"
#include "commands/commands.h"
#include "commands/other_formats.h"
#include "progress.h"

namespace cairn::cli {
namespace {

struct VerifyCliOptions {
  std::string path;
  bool json = false;
};

// AXLearn and safetensors: every stored piece through the reader
// (CheckpointReader::VerifyStored: the zarr layer's chunk check).
int RunVerifyOtherFormat(const VerifyCliOptions& opts, layout::OpenedCheckpoint& opened) {
  std::vector<layout::StoredProblem> problems;
  auto stats = [&] {
    ProgressBar bar("verify");
    return opened.reader->VerifyStored(
        [&](layout::StoredProblem p) { problems.push_back(std::move(p)); },
        [&bar](uint64_t done, uint64_t total) { bar.Update(done, total); });
  }();
  if (!stats.ok()) return PrintError("verify", "`" + opts.path + "`", stats.status(), 2);
  if (opts.json) {
    Json list = Json::array();
    for (const layout::StoredProblem& p : problems) {
      list.push_back({{"kind", p.kind}, {"array", p.array}, {"key", p.key}, {"file", p.url},
                      {"message", p.message}});
    }
    std::printf("%s\n", DumpLine({{"path", opened.location}, {"format", opened.format},
                                  {"ok", problems.empty()}, {"arrays", stats->arrays},
                                  {"chunks", stats->pieces}, {"bytes_checked", stats->bytes},
                                  {"problems", list}})
                            .c_str());
  } else {
    for (const layout::StoredProblem& p : problems) {
      std::printf("%s: array %s, key %s, %s: %s\n", p.kind.c_str(), p.array.c_str(),
                  p.key.empty() ? "-" : p.key.c_str(), p.url.empty() ? opened.location.c_str() : p.url.c_str(),
                  p.message.c_str());
    }
    if (problems.empty()) {
      std::printf("OK: %s, %zu arrays, %" PRIu64 " chunks, %" PRIu64 " bytes verified\n",
                  opened.format.c_str(), stats->arrays, stats->pieces, stats->bytes);
    } else {
      std::printf("%zu problems in %s\n", problems.size(), opened.location.c_str());
    }
  }
  return problems.empty() ? 0 : 1;
}

// An AXLearn or safetensors checkpoint that does not open (a broken or
// duplicated AXLearn index entry): damage, reported as one problem.
int ReportUnopenable(const VerifyCliOptions& opts, const Status& status) {
  const std::string message = status.ToString();
  if (opts.json) {
    std::printf("%s\n", DumpLine({{"path", opts.path}, {"ok", false},
                                  {"problems", Json::array({{{"kind", "unreadable_checkpoint"}, {"array", ""},
                                                             {"key", ""}, {"file", opts.path},
                                                             {"message", message}}})}})
                            .c_str());
  } else {
    std::printf("unreadable_checkpoint: %s: %s\n1 problems in %s\n", opts.path.c_str(), message.c_str(),
                opts.path.c_str());
  }
  return 1;
}

int RunVerify(const VerifyCliOptions& opts) {
  if (auto other = OpenOtherFormat(opts.path)) {
    if (!other->ok()) return ReportUnopenable(opts, other->status());
    return RunVerifyOtherFormat(opts, **other);
  }
  auto loc = orbax::OpenLocation(opts.path);
  if (!loc.ok()) return PrintError("verify", "`" + opts.path + "`", loc.status(), 2);
  Result<inspect::VerifyReport> report = [&] {
    ProgressBar bar("verify");
    inspect::VerifyOptions options;
    options.progress = [&bar](uint64_t done, uint64_t total) { bar.Update(done, total); };
    return inspect::VerifyCheckpoint(*loc, options);
  }();
  if (!report.ok()) return PrintError("verify", "`" + opts.path + "`", report.status(), 2);
  if (opts.json) {
    std::printf("%s\n", DumpLine(inspect::ToJson(*report)).c_str());
  } else {
    for (const inspect::Problem& p : report->problems) {
      std::printf("%s\n", inspect::ToString(p).c_str());
    }
    if (report->ok()) {
      std::printf("OK: %zu items, %zu arrays, %" PRIu64 " chunks, %" PRIu64 " bytes verified\n",
                  report->items, report->arrays, report->chunks, report->bytes_read);
    } else {
      std::printf("%zu problems in %s\n", report->problems.size(), report->path.c_str());
    }
  }
  return report->ok() ? 0 : 1;
}

}  // namespace

Command RegisterVerify(CLI::App& app) {
  auto opts = std::make_shared<VerifyCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "verify", "Read every chunk of a checkpoint (Orbax, AXLearn, safetensors) and check every "
                "checksum, that every "
                "chunk exists, OCDBT data files, _METADATA and uncommitted tmp directories. "
                "Exit status 1 and a list of problems when anything is broken.");
  sub->add_option("checkpoint", opts->path, "checkpoint directory (path, file://, s3:// or gs:// URL)")
      ->required();
  sub->add_flag("--json", opts->json, "Print the report as one JSON object");
  return Command{sub, [opts] { return RunVerify(*opts); }};
}

}  // namespace cairn::cli
