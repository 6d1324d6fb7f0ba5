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
// when there is any; 0 when all is well; 2 when CKPT is no checkpoint. A
// root's step that was never committed (left by an interrupted save) is a
// warning on stderr, as the manager sees it, not a problem.
// `--json` prints the report as one object. A progress bar on a terminal.
// The work is one call of cairn::VerifyCheckpoint (include/cairn/inspect.h).
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>

#include "cairn/inspect.h"
#include "cli_util.h"
#include "commands/commands.h"
#include "progress.h"

namespace cairn::cli {
namespace {

struct VerifyCliOptions {
  std::string path;
  bool json = false;
};

int RunVerify(const VerifyCliOptions& opts) {
  Result<VerifyReport> report = [&] {
    ProgressBar bar("verify");
    return VerifyCheckpoint(opts.path, [&bar](uint64_t done, uint64_t total) { bar.Update(done, total); });
  }();
  if (!report.ok()) return PrintError("verify", "`" + opts.path + "`", report.status());
  if (opts.json) {
    std::printf("%s\n", ToJson(*report).c_str());
    return report->ok() ? 0 : 1;
  }
  for (const VerifyProblem& w : report->warnings) {
    std::fprintf(stderr, "cairn verify: warning: %s: %s\n", w.file.c_str(), w.message.c_str());
  }
  for (const VerifyProblem& p : report->problems) std::printf("%s\n", ToString(*report, p).c_str());
  if (!report->ok()) {
    std::printf("%zu problems in %s\n", report->problems.size(), report->path.c_str());
  } else if (report->format == "orbax") {
    std::printf("OK: %zu items, %zu arrays, %" PRIu64 " chunks, %" PRIu64 " bytes verified\n",
                report->items, report->arrays, report->chunks, report->bytes);
  } else {
    std::printf("OK: %s, %zu arrays, %" PRIu64 " chunks, %" PRIu64 " bytes verified\n",
                report->format.c_str(), report->arrays, report->chunks, report->bytes);
  }
  return report->ok() ? 0 : 1;
}

}  // namespace

Command RegisterVerify(CLI::App& app) {
  auto opts = std::make_shared<VerifyCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "verify", "Read every chunk of a checkpoint (Orbax, AXLearn, safetensors) and check every "
                "checksum, that every "
                "chunk exists, OCDBT data files and _METADATA (a step never committed is a "
                "warning). Exit status 1 and a list of problems when anything is broken.");
  sub->add_option("checkpoint", opts->path, "checkpoint directory (path, file://, s3:// or gs:// URL)")
      ->required();
  sub->add_flag("--json", opts->json, "Print the report as one JSON object");
  return Command{sub, [opts] { return RunVerify(*opts); }};
}

}  // namespace cairn::cli
