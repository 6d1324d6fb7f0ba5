// `cairn ls URL [--json]`: what is stored at a URL.
//
// A kvstore URL (or local path) lists its keys with their sizes, sorted;
// `--json` prints a list of {"key", "bytes"}. When the URL names an array (a
// `|zarr3:`/`|zarr2:` part, or zarr.json/.zarray at the URL's root) it
// prints one line: path (the array's URL), dtype, shape, chunks and bytes
// (the stored bytes of all its keys); `--json` prints a list with one
// {"path", "dtype", "shape", "chunks", "bytes"}.
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cairn/kvstore/url.h"
#include "cairn/util/json.h"
#include "cairn/zarr/array_url.h"
#include "commands/commands.h"

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

int RunLs(const LsOptions& opts) {
  auto parsed = ParseArrayUrl(opts.url);
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
      path = parsed->kvstore_url + (*format == ZarrFormat::kV3 ? "|zarr3:" : "|zarr2:");
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
      "ls", "List the keys (with sizes) of a kvstore URL or path, or describe the array a URL "
            "names (path, dtype, shape, chunks, stored bytes).");
  sub->add_option("url", opts->url,
                  "file:///dir/, memory://x/, file:///dir/|ocdbt:, ...|zarr3:, or a path")
      ->required();
  sub->add_flag("--json", opts->json, "Print JSON: [{\"key\",\"bytes\"}] or, for an array, "
                                      "[{\"path\",\"dtype\",\"shape\",\"chunks\",\"bytes\"}]");
  return Command{sub, [opts] { return RunLs(*opts); }};
}

}  // namespace cairn::cli
