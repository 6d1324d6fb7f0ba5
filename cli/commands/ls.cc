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
// The work is one call of cairn::ListAddress (include/cairn/inspect.h).
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>

#include "cairn/inspect.h"
#include "cli_util.h"
#include "commands/commands.h"

namespace cairn::cli {
namespace {

struct LsOptions {
  std::string url;
  bool json = false;
};

int RunLs(const LsOptions& opts) {
  std::string what;
  Result<Listing> listing = ListAddress(opts.url, &what);
  if (!listing.ok()) return PrintError("ls", what, listing.status(), 1);
  if (!listing->unreadable_item.empty()) {
    std::fprintf(stderr, "cairn ls: item %s: %s\n", listing->unreadable_item.c_str(),
                 listing->unreadable_item_error.c_str());
    return 1;
  }
  if (opts.json) {
    std::printf("%s\n", ToJson(*listing).c_str());
    return 0;
  }
  for (const KeyListing& k : listing->keys) std::printf("%12" PRIu64 "  %s\n", k.bytes, k.key.c_str());
  for (const ArrayListing& a : listing->arrays) {
    std::printf("%s %s %s %s %" PRIu64 "\n", a.path.c_str(), a.dtype.c_str(), ShapeString(a.shape).c_str(),
                ShapeString(a.chunks).c_str(), a.bytes);
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
