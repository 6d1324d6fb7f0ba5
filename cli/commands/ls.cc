// `cairn ls URL [--json]`: what is stored at a URL.
//
// A kvstore URL (or local path) lists its keys with their sizes, sorted;
// `--json` prints a list of {"key", "bytes"}. When the URL names an array (a
// `|zarr3:`/`|zarr2:` part, or zarr.json/.zarray at the URL's root) it
// prints one line: path (the array's URL), dtype, shape, chunks and bytes
// (the stored bytes of all its keys); `--json` prints a list with one
// {"path", "dtype", "shape", "chunks", "bytes"}.
//
// A local path (or file://, memory://, s3:// or gs:// URL) naming an Orbax
// checkpoint (an item with `_METADATA`, a step, or a root: its latest
// finalized step) lists one row
// per array leaf: path (the param name, `<item>/` first when the step has
// several PyTree items), dtype, shape, stored chunk shape and stored bytes,
// in `_METADATA` order; `--json` prints the same rows as a list.
//
// An AXLearn step or root (its latest committed step) or a safetensors file
// or set lists one row per array in the same form (chunks: the stored write
// shape; for safetensors the whole array), through the checkpoint-format
// interface.
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cairn/engine/convert/convert_checkpoint.h"
#include "cairn/kvstore/url.h"
#include "cairn/layout/open_checkpoint.h"
#include "cairn/layout/inspect/checkpoint.h"
#include "cairn/layout/orbax/metadata_files.h"
#include "cairn/layout/orbax/step.h"
#include "cairn/util/json.h"
#include "cairn/zarr/array_url.h"
#include "cli_util.h"
#include "commands/commands.h"
#include "commands/other_formats.h"

namespace cairn::cli {
namespace {

struct LsOptions {
  std::string url;
  bool json = false;
};

std::string Dump(const Json& j) {
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string FormatShape(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) s += ',';
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

int Fail(const std::string& what, const Status& status) {
  std::fprintf(stderr, "cairn ls: %s: %s\n", what.c_str(), status.ToString().c_str());
  return 1;
}

uint64_t TotalBytes(const std::vector<KeyInfo>& keys) {
  uint64_t total = 0;
  for (const KeyInfo& k : keys) total += k.size;
  return total;
}

int PrintArray(const std::string& path, const ZarrArray& array, uint64_t bytes, bool json) {
  const ArrayMetadata& md = array.metadata();
  std::string dtype(DTypeName(md.dtype));
  if (json) {
    Json row = {{"path", path}, {"dtype", dtype}, {"shape", md.shape},
                {"chunks", md.chunk_shape}, {"bytes", bytes}};
    std::printf("%s\n", Dump(Json::array({row})).c_str());
  } else {
    std::printf("%s %s %s %s %" PRIu64 "\n", path.c_str(), dtype.c_str(),
                FormatShape(md.shape).c_str(), FormatShape(md.chunk_shape).c_str(), bytes);
  }
  return 0;
}

// The Orbax checkpoint `url` names, when it names one.
std::optional<orbax::Location> CheckpointLocation(const std::string& url) {
  std::optional<std::string> where = inspect::CheckpointPathOf(url);
  if (!where) return std::nullopt;
  auto loc = orbax::OpenLocation(*where);
  if (!loc.ok()) return std::nullopt;
  auto kind = inspect::ClassifyCheckpoint(*loc);
  if (!kind.ok()) return std::nullopt;
  // A bare OCDBT database (manifest.ocdbt, no _METADATA) lists as a kvstore.
  if (*kind == inspect::CheckpointKind::kItem && !orbax::HasKey(*loc, orbax::kTreeMetadataFile)) {
    return std::nullopt;
  }
  return *loc;
}

int RunLsCheckpoint(const orbax::Location& loc, bool json) {
  const std::string path = loc.Path();
  auto info = inspect::DescribeCheckpoint(loc);
  if (!info.ok()) return Fail("`" + path + "`", info.status());
  size_t pytree_items = 0;
  for (const inspect::ItemInfo& item : info->items) pytree_items += item.is_pytree ? 1 : 0;
  if (pytree_items == 0) {
    return Fail("`" + path + "`", NotFoundError("no PyTree item with arrays in " +
                                                (info->step_dir.empty() ? path : info->step_dir)));
  }
  std::vector<inspect::ArrayEntry> arrays;
  for (const inspect::ItemInfo& item : info->items) {
    if (!item.is_pytree) continue;
    if (!item.error.empty()) {
      std::fprintf(stderr, "cairn ls: item %s: %s\n", item.dir.c_str(), item.error.c_str());
      return 1;
    }
    const std::string prefix = pytree_items > 1 ? item.name + "/" : "";
    for (inspect::ArrayEntry a : item.arrays) {
      a.path = prefix + a.path;
      arrays.push_back(std::move(a));
    }
  }
  if (json) {
    Json rows = Json::array();
    for (const inspect::ArrayEntry& a : arrays) rows.push_back(inspect::ToJson(a));
    std::printf("%s\n", Dump(rows).c_str());
    return 0;
  }
  for (const inspect::ArrayEntry& a : arrays) {
    std::printf("%s %s %s %s %" PRIu64 "\n", a.path.c_str(), std::string(DTypeName(a.dtype)).c_str(),
                FormatShape(a.shape).c_str(), FormatShape(a.chunks).c_str(), a.bytes);
  }
  return 0;
}

// An AXLearn or safetensors checkpoint at `url`, listed through the
// checkpoint-format interface; nullopt when there is none.
std::optional<int> RunLsOtherFormat(const std::string& url, bool json) {
  auto other = OpenOtherFormat(url);
  if (!other) return std::nullopt;
  if (!other->ok()) return PrintError("ls", "`" + url + "`", other->status(), 1);
  layout::OpenedCheckpoint* opened = &**other;
  Json rows = Json::array();
  for (const layout::ArrayInfo& a : opened->reader->arrays()) {
    if (json) {
      rows.push_back({{"path", a.path}, {"dtype", std::string(DTypeName(a.dtype))},
                      {"shape", a.shape}, {"chunks", a.write_shape}, {"bytes", a.stored_bytes},
                      {"format", opened->format}});
    } else {
      std::printf("%s %s %s %s %" PRIu64 "\n", a.path.c_str(), std::string(DTypeName(a.dtype)).c_str(),
                  FormatShape(a.shape).c_str(), FormatShape(a.write_shape).c_str(), a.stored_bytes);
    }
  }
  if (json) std::printf("%s\n", Dump(rows).c_str());
  return 0;
}

int RunLs(const LsOptions& opts) {
  if (std::optional<orbax::Location> ckpt = CheckpointLocation(opts.url)) {
    return RunLsCheckpoint(*ckpt, opts.json);
  }
  if (std::optional<int> listed = RunLsOtherFormat(opts.url, opts.json)) return *listed;
  // A local path becomes a file:// URL (array URLs need a scheme).
  auto parsed = ParseArrayUrl(NormalizeUrl(opts.url));
  if (!parsed.ok()) return Fail("`" + opts.url + "`", parsed.status());
  auto store = OpenKvStore(parsed->kvstore_url);
  if (!store.ok()) return Fail("opening `" + parsed->kvstore_url + "`", store.status());
  std::optional<ZarrFormat> format = parsed->format;
  if (!format) {
    // An array when its metadata is at the root: zarr.json first, as
    // TensorStore's format detection does.
    for (ZarrFormat f : {ZarrFormat::kV3, ZarrFormat::kV2}) {
      auto meta = (*store)->Get(MetadataKey(f), ByteRange::Range(0, 0));
      if (!meta.ok()) return Fail("reading " + (*store)->Describe(MetadataKey(f)), meta.status());
      if (meta->has_value()) {
        format = f;
        break;
      }
    }
  }
  auto keys = (*store)->List("");
  if (!keys.ok()) return Fail("listing `" + (*store)->url() + "`", keys.status());
  if (format) {
    auto array = ZarrArray::Open(*store, "", format);
    if (!array.ok()) return Fail("opening array `" + opts.url + "`", array.status());
    std::string path = NormalizeUrl(opts.url);
    if (!parsed->format) {
      // Printed as a directory, the way the zarr drivers read it
      // ("file:///a" names the array in /a/, as "file:///a/|zarr3:" does).
      std::string base = parsed->kvstore_url;
      if (base.back() != '/' && base.back() != ':') base += '/';
      path = base + (*format == ZarrFormat::kV3 ? "|zarr3:" : "|zarr2:");
    }
    return PrintArray(path, **array, TotalBytes(*keys), opts.json);
  }
  if (opts.json) {
    Json rows = Json::array();
    for (const KeyInfo& k : *keys) rows.push_back({{"key", k.key}, {"bytes", k.size}});
    std::printf("%s\n", Dump(rows).c_str());
  } else {
    for (const KeyInfo& k : *keys) std::printf("%12" PRIu64 "  %s\n", k.size, k.key.c_str());
  }
  return 0;
}

}  // namespace

Command RegisterLs(CLI::App& app) {
  auto opts = std::make_shared<LsOptions>();
  CLI::App* sub = app.add_subcommand(
      "ls", "List the keys (with sizes) of a kvstore URL or path, describe the array a URL "
            "names, or list the arrays of an Orbax checkpoint (root, step or item directory): "
            "path, dtype, shape, chunks, stored bytes.");
  sub->add_option("url", opts->url,
                  "file:///dir/, memory://x/, s3://bucket/dir/, gs://bucket/dir/, ...|ocdbt:, ...|zarr3:, or a path")
      ->required();
  sub->add_flag("--json", opts->json, "Print JSON: [{\"key\",\"bytes\"}] or, for an array, "
                                      "[{\"path\",\"dtype\",\"shape\",\"chunks\",\"bytes\"}]");
  return Command{sub, [opts] { return RunLs(*opts); }};
}

}  // namespace cairn::cli
