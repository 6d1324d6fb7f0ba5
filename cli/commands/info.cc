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
// one object (see inspect::ToJson(CheckpointInfo)) with "format" added.
// Exit status: 0, or 1 when CKPT is no checkpoint or an item is unreadable.
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>

#include "cairn/layout/inspect/checkpoint.h"
#include "cli_util.h"
#include "commands/commands.h"
#include "commands/other_formats.h"

namespace cairn::cli {
namespace {

struct InfoOptions {
  std::string path;
  bool json = false;
};

// The variant of the first readable PyTree item ("" when none); "mixed"
// when items differ.
std::string FormatOf(const inspect::CheckpointInfo& info) {
  std::string format;
  for (const inspect::ItemInfo& item : info.items) {
    if (item.variant.empty()) continue;
    if (format.empty()) format = item.variant;
    else if (format != item.variant) return "mixed";
  }
  return format;
}

// AXLearn and safetensors, through the checkpoint-format interface.
int RunInfoOtherFormat(const InfoOptions& opts, const layout::OpenedCheckpoint& opened) {
  uint64_t bytes = 0, stored = 0;
  for (const layout::ArrayInfo& a : opened.reader->arrays()) {
    bytes += NumElements(a.shape) * DTypeSize(a.dtype);
    stored += a.stored_bytes;
  }
  Json j = {{"path", opened.location},
            {"format", opened.format},
            {"arrays", opened.reader->arrays().size()},
            {"bytes", bytes},
            {"iterator_files", opened.iterator_files.size()}};
  if (opened.step) j["step"] = *opened.step;
  if (stored > 0) j["stored_bytes"] = stored;
  if (opts.json) {
    std::printf("%s\n", DumpLine(j).c_str());
    return 0;
  }
  std::printf("path: %s\n", opened.location.c_str());
  std::printf("format: %s\n", opened.format.c_str());
  if (opened.step) std::printf("step: %lld\n", static_cast<long long>(*opened.step));
  std::printf("arrays: %zu, %" PRIu64 " bytes%s\n", opened.reader->arrays().size(), bytes,
              stored > 0 ? (", " + std::to_string(stored) + " bytes stored").c_str() : "");
  if (!opened.iterator_files.empty()) {
    std::printf("iterator state: %zu files\n", opened.iterator_files.size());
  }
  return 0;
}

int RunInfo(const InfoOptions& opts) {
  if (auto other = OpenOtherFormat(opts.path)) {
    if (!other->ok()) return PrintError("info", "`" + opts.path + "`", other->status(), 1);
    return RunInfoOtherFormat(opts, **other);
  }
  auto loc = orbax::OpenLocation(opts.path);
  if (!loc.ok()) return PrintError("info", "`" + opts.path + "`", loc.status(), 1);
  if (auto tiers = DescribeEmergencyTiers(*loc); tiers && tiers->value("kind", "") == "local") {
    return PrintEmergencyTiers(*tiers, opts.json);  // an emergency run's local directory
  } else if (tiers && !opts.json) {
    PrintEmergencyTiers(*tiers, false);  // a persistent root: its own description follows
  }
  auto info = inspect::DescribeCheckpoint(*loc);
  if (!info.ok()) return PrintError("info", "`" + opts.path + "`", info.status(), 1);
  int status = 0;
  for (const inspect::ItemInfo& item : info->items) {
    if (!item.error.empty()) status = 1;
  }
  if (opts.json) {
    Json j = inspect::ToJson(*info);
    j["format"] = FormatOf(*info);
    std::printf("%s\n", DumpLine(j).c_str());
    return status;
  }
  std::printf("path: %s (%s)\n", info->path.c_str(), inspect::CheckpointKindName(info->kind));
  std::printf("format: %s\n", FormatOf(*info).empty() ? "unknown" : FormatOf(*info).c_str());
  if (info->kind == inspect::CheckpointKind::kRoot) {
    std::string finalized, tmp;
    size_t nf = 0, nt = 0;
    for (const inspect::StepEntry& s : info->steps) {
      std::string& list = s.finalized ? finalized : tmp;
      (s.finalized ? nf : nt)++;
      list += (list.empty() ? "" : " ") + s.name;
    }
    std::printf("steps: %zu finalized (%s)\n", nf, finalized.c_str());
    if (nt > 0) std::printf("uncommitted: %zu (%s)\n", nt, tmp.c_str());
    if (!info->root_metadata.is_null()) {
      std::printf("root metadata: %s\n", DumpLine(info->root_metadata).c_str());
    }
  }
  if (!info->step_dir.empty()) std::printf("step: %s\n", info->step_dir.c_str());
  if (info->step_metadata.is_object()) {
    if (auto it = info->step_metadata.find("custom_metadata"); it != info->step_metadata.end()) {
      std::printf("step custom metadata: %s\n", DumpLine(*it).c_str());
    }
  }
  std::printf("items: %zu\n", info->items.size());
  for (const inspect::ItemInfo& item : info->items) {
    std::printf("  %s\n", item.name.empty() ? "." : item.name.c_str());
    if (!item.handler.empty()) std::printf("    handler: %s\n", item.handler.c_str());
    if (!item.is_pytree) continue;
    if (!item.error.empty()) {
      std::printf("    error: %s\n", item.error.c_str());
      continue;
    }
    std::printf("    format: %s\n", item.variant.c_str());
    std::printf("    arrays: %zu, %" PRIu64 " bytes stored\n", item.arrays.size(),
                item.total_bytes);
    if (!item.custom_metadata.is_null()) {
      std::printf("    custom metadata: %s\n", DumpLine(item.custom_metadata).c_str());
    }
  }
  return status;
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
