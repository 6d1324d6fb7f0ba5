// `cairn info CKPT [--json]`: what a checkpoint holds. AXLearn steps and
// safetensors files or sets (through the checkpoint-format interface):
// format, step, number of arrays and bytes, iterator state. Orbax:
//
// CKPT is a checkpoint root, step or item directory (path, file://, s3:// or
// gs:// URL).
// Prints the format variant (ocdbt+zarr3, ocdbt+zarr2, dir+zarr3,
// dir+zarr2), the steps found (finalized and uncommitted tmp directories)
// for a root, the described step (a root: its latest finalized step), its
// items with their handlers, and per PyTree item the number of arrays, their
// total stored bytes and the custom metadata. `--json` prints the same as
// one object (cairn::ToJson(CheckpointDescription)). An emergency run's
// local directory or persistent root also shows what its tiers hold.
// The work is one call of cairn::DescribeCheckpoint (include/cairn/inspect.h),
// after cairn::DescribeEmergencyRun.
// Exit status: 0, or 1 when CKPT is no checkpoint or an item is unreadable.
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>

#include "cairn/inspect.h"
#include "cli_util.h"
#include "commands/commands.h"

namespace cairn::cli {
namespace {

struct InfoOptions {
  std::string path;
  bool json = false;
};

void PrintEmergencyRun(const EmergencyRunDescription& run) {
  // A field's line, when the record has a value for it.
  auto line = [](const char* label, const std::string& value) {
    if (!value.empty() && value != "null") std::printf("%s: %s\n", label, value.c_str());
  };
  std::printf("emergency run: %s tier\n", run.kind.c_str());
  if (!run.process_index.empty()) {
    std::printf("process: %s of %s, %s replicas\n", run.process_index.c_str(),
                run.process_count.c_str(),
                run.num_replicas.empty() ? "null" : run.num_replicas.c_str());
  }
  line("local steps", run.local_steps);
  line("peer steps (by owner)", run.peer_steps);
  line("uncommitted", run.uncommitted);
  if (!run.persistent_directory.empty()) {
    std::printf("persistent directory: %s\n", run.persistent_directory.c_str());
  }
  line("persistent steps", run.persistent_steps);
  for (const EmergencyRunDescription::LocalDirectory& d : run.local_directories) {
    std::printf("process %s local directory %s: local steps %s, peer steps %s\n", d.process.c_str(),
                d.local_directory.c_str(), d.local_steps.c_str(), d.peer_steps.c_str());
  }
}

// AXLearn and safetensors.
void PrintOtherFormat(const CheckpointDescription& d) {
  std::printf("path: %s\n", d.path.c_str());
  std::printf("format: %s\n", d.format.c_str());
  if (d.step) std::printf("step: %lld\n", static_cast<long long>(*d.step));
  std::printf("arrays: %zu, %" PRIu64 " bytes%s\n", d.arrays, d.bytes,
              d.stored_bytes > 0 ? (", " + std::to_string(d.stored_bytes) + " bytes stored").c_str() : "");
  if (d.iterator_files > 0) std::printf("iterator state: %zu files\n", d.iterator_files);
}

void PrintOrbax(const CheckpointDescription& d) {
  std::printf("path: %s (%s)\n", d.path.c_str(), d.kind.c_str());
  std::printf("format: %s\n", d.variant.empty() ? "unknown" : d.variant.c_str());
  if (d.kind == "root") {
    std::string finalized, tmp;
    size_t nf = 0, nt = 0;
    for (const StepListing& s : d.steps) {
      std::string& list = s.finalized ? finalized : tmp;
      (s.finalized ? nf : nt)++;
      list += (list.empty() ? "" : " ") + s.name;
    }
    std::printf("steps: %zu finalized (%s)\n", nf, finalized.c_str());
    if (nt > 0) std::printf("uncommitted: %zu (%s)\n", nt, tmp.c_str());
    if (d.root_metadata != "null") std::printf("root metadata: %s\n", d.root_metadata.c_str());
  }
  if (!d.step_dir.empty()) std::printf("step: %s\n", d.step_dir.c_str());
  if (!d.step_custom_metadata.empty()) {
    std::printf("step custom metadata: %s\n", d.step_custom_metadata.c_str());
  }
  std::printf("items: %zu\n", d.items.size());
  for (const ItemDescription& item : d.items) {
    std::printf("  %s\n", item.name.empty() ? "." : item.name.c_str());
    if (!item.handler.empty()) std::printf("    handler: %s\n", item.handler.c_str());
    if (!item.is_pytree) continue;
    if (!item.error.empty()) {
      std::printf("    error: %s\n", item.error.c_str());
      continue;
    }
    std::printf("    format: %s\n", item.variant.c_str());
    std::printf("    arrays: %zu, %" PRIu64 " bytes stored\n", item.arrays.size(), item.total_bytes);
    if (item.custom_metadata != "null") {
      std::printf("    custom metadata: %s\n", item.custom_metadata.c_str());
    }
  }
}

int RunInfo(const InfoOptions& opts) {
  // An emergency run's tiers: alone for a local directory; before the
  // checkpoint's description for a persistent root (not with --json).
  // Unreadable records leave only the description.
  if (auto run = DescribeEmergencyRun(opts.path); run.ok() && *run) {
    if ((*run)->kind == "local") {
      if (opts.json) std::printf("%s\n", (*run)->json.c_str());
      else PrintEmergencyRun(**run);
      return 0;
    }
    if (!opts.json) PrintEmergencyRun(**run);
  }
  Result<CheckpointDescription> d = DescribeCheckpoint(opts.path);
  if (!d.ok()) return PrintError("info", "`" + opts.path + "`", d.status());
  if (opts.json) {
    std::printf("%s\n", ToJson(*d).c_str());
  } else if (d->format == "orbax") {
    PrintOrbax(*d);
  } else {
    PrintOtherFormat(*d);
  }
  return d->ok() ? 0 : 1;
}

}  // namespace

Command RegisterInfo(CLI::App& app) {
  auto opts = std::make_shared<InfoOptions>();
  CLI::App* sub = app.add_subcommand(
      "info", "Describe a checkpoint (AXLearn, safetensors, or Orbax root, step or item "
              "directory): format variant, "
              "steps (finalized and uncommitted), items and handlers, custom metadata, number "
              "of arrays and stored bytes.");
  sub->add_option("checkpoint", opts->path, "checkpoint directory (path, file://, s3:// or gs:// URL)")
      ->required();
  sub->add_flag("--json", opts->json, "Print one JSON object");
  return Command{sub, [opts] { return RunInfo(*opts); }};
}

}  // namespace cairn::cli
