// `cairn verify CKPT [--json]`: reads every chunk of every array of an Orbax
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

#include "cairn/layout/inspect/checkpoint.h"
#include "cairn/layout/inspect/verify.h"
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
      "verify", "Read every chunk of an Orbax checkpoint and check every checksum, that every "
                "chunk exists, OCDBT data files, _METADATA and uncommitted tmp directories. "
                "Exit status 1 and a list of problems when anything is broken.");
  sub->add_option("checkpoint", opts->path, "checkpoint directory (path or file:// URL)")
      ->required();
  sub->add_flag("--json", opts->json, "Print the report as one JSON object");
  return Command{sub, [opts] { return RunVerify(*opts); }};
}

}  // namespace cairn::cli
