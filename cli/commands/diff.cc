// `cairn diff A B [--json] [--atol X] [--rtol Y]`: compares two checkpoints
// or arrays of any formats (Orbax variants, AXLearn, safetensors, zarr
// array URLs; cairn::Diff in include/cairn/inspect.h): paths only in A / only in
// B, dtype and shape differences, and per array the number of differing
// values and the max abs / max rel difference, streaming chunk by chunk.
// With --atol/--rtol, values within the tolerance are equal, and arrays
// whose dtypes differ (a bf16 cast) are reported as such, "equal within
// tolerance", never "identical". --include and --rename select and rename
// A's arrays as convert does (one matcher, layout/path_rules.h).
// Exit status: 0 identical or equal within tolerance, 1 different, 2 bad
// input (kExitStatusHelp). A progress bar on a terminal.
#include <cinttypes>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cairn/inspect.h"
#include "cli_util.h"
#include "commands/commands.h"
#include "progress.h"

namespace cairn::cli {
namespace {

struct DiffCliOptions {
  std::string a, b;
  bool json = false;
  double atol = 0, rtol = 0;
  std::vector<std::string> include, renames;
};

std::string Name(const std::string& path) { return path.empty() ? "(array)" : path; }

int RunDiff(const DiffCliOptions& opts) {
  Result<DiffReport> report = [&]() -> Result<DiffReport> {
    ProgressBar bar("diff");
    DiffOptions options;
    options.atol = opts.atol;
    options.rtol = opts.rtol;
    options.include = opts.include;
    for (const std::string& rule : opts.renames) {
      CAIRN_ASSIGN_OR_RETURN(auto kv, SplitRule(rule, "--rename"));
      options.renames.push_back(std::move(kv));
    }
    options.progress = [&bar](uint64_t done, uint64_t total) { bar.Update(done, total); };
    return Diff(opts.a, opts.b, options);
  }();
  if (!report.ok()) return PrintError("diff", opts.a + " vs " + opts.b, report.status());
  const bool same = report->equal_within_tolerance;
  if (opts.json) {
    std::printf("%s\n", ToJson(*report).c_str());
    return same ? 0 : 1;
  }
  for (const std::string& p : report->only_in_a) std::printf("only in A: %s\n", Name(p).c_str());
  for (const std::string& p : report->only_in_b) std::printf("only in B: %s\n", Name(p).c_str());
  for (const std::string& p : report->strings_differ) {
    std::printf("%s: string values differ\n", Name(p).c_str());
  }
  for (const ArrayDifference& d : report->arrays) {
    const std::string n = Name(d.path);
    if (d.same) {
      // Equal within the tolerance, yet not identical: say how.
      if (d.dtype_a == d.dtype_b && d.max_abs == 0) continue;
      std::printf("%s: ", n.c_str());
      if (d.dtype_a != d.dtype_b) std::printf("dtype %s vs %s, ", d.dtype_a.c_str(), d.dtype_b.c_str());
      std::printf("values equal within tolerance (max abs %.9g, max rel %.9g)\n", d.max_abs, d.max_rel);
      continue;
    }
    if (d.dtype_a != d.dtype_b) {
      std::printf("%s: dtype %s vs %s\n", n.c_str(), d.dtype_a.c_str(), d.dtype_b.c_str());
    }
    if (d.shape_a != d.shape_b) {
      std::printf("%s: shape %s vs %s\n", n.c_str(), ShapeString(d.shape_a).c_str(),
                  ShapeString(d.shape_b).c_str());
    } else if (d.num_different > 0) {
      std::printf("%s: %" PRIu64 " values differ, max abs %.9g, max rel %.9g", n.c_str(),
                  d.num_different, d.max_abs, d.max_rel);
      if (d.nan_mismatches > 0) std::printf(", %" PRIu64 " NaN mismatches", d.nan_mismatches);
      std::printf("\n");
    }
  }
  const char* verdict = report->identical ? "identical" : same ? "equal within tolerance" : "different";
  std::printf("%s: %zu arrays compared (A: %s, B: %s)\n", verdict,
              report->arrays.size(), report->format_a.c_str(), report->format_b.c_str());
  return same ? 0 : 1;
}

}  // namespace

Command RegisterDiff(CLI::App& app) {
  auto opts = std::make_shared<DiffCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "diff", "Compare two checkpoints or arrays (Orbax, AXLearn, safetensors, zarr array URLs; "
              "any two formats): "
              "structure, dtypes, shapes and values (max abs/rel difference per array). "
              "Exit status 0 identical or equal within the tolerance, 1 different.");
  sub->add_option("a", opts->a, "checkpoint directory or array URL")->required();
  sub->add_option("b", opts->b, "checkpoint directory or array URL")->required();
  sub->add_flag("--json", opts->json, "Print the comparison as one JSON object");
  sub->add_option("--atol", opts->atol,
                  "values within atol + rtol * |b| count as equal (and dtypes may then differ)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--rtol", opts->rtol, "relative tolerance (see --atol)")
      ->check(CLI::NonNegativeNumber);
  sub->add_option("--include", opts->include,
                  "compare only arrays whose path matches a glob (as convert --include)");
  sub->add_option("--rename", opts->renames,
                  "OLD=NEW: A's paths starting with OLD are compared with B's NEW... "
                  "(as convert --rename)");
  return Command{sub, [opts] { return RunDiff(*opts); }};
}

}  // namespace cairn::cli
