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
// shape; for safetensors the whole array), with "format" in each JSON row.
//
// Text output has a header row and sizes as `ls -h` / gsutil print them
// (KiB, MiB, GiB); `--json` keeps exact bytes. A root's listing starts with
// the step it shows: "step 1200 of /path (latest committed; 3 steps)".
// The work is one call of cairn::ListAddress (include/cairn/inspect.h).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cairn/inspect.h"
#include "cli_util.h"
#include "commands/commands.h"

namespace cairn::cli {
namespace {

struct LsOptions {
  std::string url;
  bool json = false;
};

// Columns padded to their widest cell, two spaces apart; `right` aligns a
// column to the right (sizes). The last column is not padded.
void PrintTable(const std::vector<std::vector<std::string>>& rows, const std::vector<bool>& right) {
  std::vector<size_t> width(right.size(), 0);
  for (const auto& row : rows) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const bool last = c + 1 == row.size();
      const std::string pad(width[c] - row[c].size(), ' ');
      if (c > 0) line += "  ";
      line += right[c] ? pad + row[c] : (last ? row[c] : row[c] + pad);
    }
    std::printf("%s\n", line.c_str());
  }
}

int RunLs(const LsOptions& opts) {
  std::string what;
  Result<Listing> listing = ListAddress(opts.url, &what);
  if (!listing.ok()) return PrintError("ls", what, listing.status());
  if (!listing->unreadable_item.empty()) {
    std::fprintf(stderr, "cairn ls: item %s: %s\n", listing->unreadable_item.c_str(),
                 listing->unreadable_item_error.c_str());
    return kExitProblems;
  }
  if (opts.json) {
    std::printf("%s\n", ToJson(*listing).c_str());
    return kExitOk;
  }
  if (listing->root_step) {
    std::printf("step %lld of %s (latest committed; %zu step%s)\n",
                static_cast<long long>(*listing->root_step), opts.url.c_str(),
                listing->committed_steps, listing->committed_steps == 1 ? "" : "s");
  }
  if (listing->kind == ListingKind::kKeys) {
    std::vector<std::vector<std::string>> rows = {{"SIZE", "KEY"}};
    for (const KeyListing& k : listing->keys) rows.push_back({HumanSize(k.bytes), k.key});
    if (rows.size() > 1) PrintTable(rows, {true, false});
    return kExitOk;
  }
  std::vector<std::vector<std::string>> rows = {{"PATH", "DTYPE", "SHAPE", "CHUNKS", "SIZE"}};
  for (const ArrayListing& a : listing->arrays) {
    rows.push_back({a.path, a.dtype, ShapeString(a.shape), ShapeString(a.chunks), HumanSize(a.bytes)});
  }
  PrintTable(rows, {false, false, false, false, true});
  return kExitOk;
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
