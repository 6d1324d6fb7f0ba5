// `cairn convert SRC DST --to {orbax,orbax-zarr2,axlearn,safetensors}`: converts a checkpoint
// of any format cairn reads (detected, or --from) into another, streaming
// within --memory-budget, and commits the destination last. The work is one
// call of cairn::Convert (include/cairn/convert.h), the same the Python
// package makes.
//
// Prints a progress bar (bytes, throughput, ETA) on a terminal, then a
// summary line; with --json, one JSON object instead.
// Under `mpirun -n N` the ranks split the work (each within its own budget)
// and rank 0 commits and prints.
// Exit status: 0 on success, 1 on a failed conversion, 2 on bad options,
// 130 (143) when SIGINT (SIGTERM) interrupted it: it stops before its commit,
// clears its progress bar and says what a re-run keeps (signals.h).
#include <chrono>
#include <cinttypes>
#include <cstdlib>
#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cairn/convert.h"
#include "cairn/environment.h"
#include "cairn/options.h"
#include "cli_util.h"
#include "commands/commands.h"
#include "progress.h"
#include "signals.h"

namespace cairn::cli {
namespace {

struct ConvertCliOptions {
  std::string source, dest, to, from;
  int64_t step = -1;
  std::vector<std::string> include, exclude, renames, casts;
  std::string memory_budget = "1GiB";
  std::string max_file_size = "0";
  int threads = 0;
  bool verify = false, overwrite = false, json = false, no_resume = false;
};

// "A=B" -> {A, B}.
Result<std::pair<std::string, std::string>> SplitRule(const std::string& rule, const char* what) {
  size_t eq = rule.find('=');
  if (eq == std::string::npos || eq == 0) {
    return Status(StatusCode::kInvalidArgument,
                  std::string(what) + " `" + rule + "` is not of the form PATTERN=VALUE");
  }
  return std::make_pair(rule.substr(0, eq), rule.substr(eq + 1));
}

Result<ConvertRequest> BuildRequest(const ConvertCliOptions& o) {
  ConvertRequest r;
  r.source = o.source;
  r.dest = o.dest;
  r.to = o.to;
  r.from = o.from;
  if (o.step >= 0) r.step = o.step;
  r.overwrite = o.overwrite;
  CAIRN_ASSIGN_OR_RETURN(r.max_file_bytes, ParseByteSize(o.max_file_size));
  CAIRN_ASSIGN_OR_RETURN(r.memory_budget, ParseByteSize(o.memory_budget));
  r.threads = o.threads;
  r.verify = o.verify;
  r.resume = !o.no_resume;
  r.include = o.include;
  r.exclude = o.exclude;
  for (const std::string& rule : o.renames) {
    CAIRN_ASSIGN_OR_RETURN(auto kv, SplitRule(rule, "--rename"));
    r.renames.push_back(std::move(kv));
  }
  for (const std::string& rule : o.casts) {
    CAIRN_ASSIGN_OR_RETURN(auto kv, SplitRule(rule, "--dtype"));
    r.casts.push_back(std::move(kv));
    CAIRN_RETURN_IF_ERROR(ValidateConvertRequest(r));  // names the dtype, in the flags' order
  }
  return r;
}

int RunConvert(const ConvertCliOptions& o) {
  auto request = BuildRequest(o);
  if (!request.ok()) return PrintError("convert", "options", request.status(), 2);
  // Under mpirun (more than one rank), the MPI coordinator; otherwise none.
  auto coordinator = CoordinatorFromEnvironment(std::chrono::minutes(30));
  if (!coordinator.ok()) return PrintError("convert", "MPI", coordinator.status(), 1);
  request->coordinator = coordinator->get();
  const bool primary = *coordinator == nullptr || (*coordinator)->is_primary();
  ProgressBar bar("convert");
  std::mutex mu;
  if (primary) {
    request->progress = [&](const ConvertProgress& p) {
      std::lock_guard lock(mu);
      bar.Update(p.bytes_done, p.bytes_total);
    };
  }
  const SignalInterrupt signals;
  request->interrupt = signals.interrupt();
  auto result = Convert(*request);
  {
    std::lock_guard lock(mu);
    bar.Clear();
  }
  if (WasInterrupted(result.status(), signals.interrupt())) {
    std::fprintf(stderr, "cairn convert: interrupted: %s.\n",
                 std::string(result.status().message()).c_str());
    return signals.exit_code();
  }
  if (!result.ok()) return PrintError("convert", "`" + o.source + "` to `" + o.dest + "`", result.status(), 1);
  if (!primary) return 0;
  const ConvertResult& s = *result;
  const double gbps = s.seconds > 0 ? s.bytes_written / s.seconds / 1e9 : 0;
  if (o.json) {
    nlohmann::json j = {{"source", s.source},
              {"source_format", s.source_format},
              {"dest", s.dest},
              {"to", o.to},
              {"arrays", s.arrays},
              {"arrays_resumed", s.arrays_resumed},
              {"bytes_read", s.bytes_read},
              {"bytes_written", s.bytes_written},
              {"seconds", s.seconds},
              {"gb_per_second", gbps},
              {"peak_slab_bytes", s.peak_slab_bytes},
              {"verified", o.verify},
              {"processes", *coordinator ? (*coordinator)->process_count() : 1},
              {"verify_seconds", s.verify_seconds}};
    std::printf("%s\n", DumpLine(j).c_str());
    return 0;
  }
  std::printf("converted %zu arrays (%.1f MiB) from %s (%s) to %s in %.2fs (%.2f GB/s)%s\n",
              s.arrays, s.bytes_written / 1048576.0, s.source.c_str(), s.source_format.c_str(),
              s.dest.c_str(), s.seconds, gbps,
              o.verify ? ", verified" : "");
  if (s.arrays_resumed > 0) {
    std::printf("resumed: %zu of the %zu arrays were kept from an interrupted run, %zu copied now "
                "(--no-resume copies every array again)\n",
                s.arrays_resumed, s.arrays, s.arrays - s.arrays_resumed);
  }
  return 0;
}

}  // namespace

Command RegisterConvert(CLI::App& app) {
  auto opts = std::make_shared<ConvertCliOptions>();
  CLI::App* sub = app.add_subcommand(
      "convert", "Convert a checkpoint (Orbax, AXLearn, safetensors) to another format, streaming");
  sub->add_option("source", opts->source, "checkpoint to read: path or URL")->required();
  sub->add_option("dest", opts->dest, "where to write: a directory path or URL")->required();
  sub->add_option("--to", opts->to, "destination format")
      ->required()
      ->check(CLI::IsMember(ConvertDestinationFormats()));
  sub->add_option("--from", opts->from, "source format (default: detected)")
      ->check(CLI::IsMember({"safetensors", "axlearn", "orbax"}));
  sub->add_option("--step", opts->step, "step of the source (default: the latest committed)");
  sub->add_option("--include", opts->include, "keep only arrays whose path matches a glob");
  sub->add_option("--exclude", opts->exclude, "drop arrays whose path matches a glob");
  sub->add_option("--rename", opts->renames, "OLD=NEW: replace a leading OLD of destination paths");
  sub->add_option("--dtype", opts->casts, "GLOB=DTYPE: cast matching arrays (e.g. '*=bfloat16')");
  sub->add_option("--memory-budget", opts->memory_budget, "bytes in flight (default 1GiB)");
  sub->add_option("--max-file-size", opts->max_file_size,
                  "safetensors: shard into files of at most this size (default: one file)");
  sub->add_option("--threads", opts->threads, "worker threads (default: the cores)");
  sub->add_flag("--verify", opts->verify, "re-read the output and compare it with the source");
  sub->add_flag("--overwrite", opts->overwrite, "replace a committed destination");
  sub->add_flag("--no-resume", opts->no_resume,
                "write every array again instead of keeping the arrays an interrupted run of "
                "the same conversion completed");
  sub->add_flag("--json", opts->json, "print one JSON summary line");
  return Command{sub, [opts] { return RunConvert(*opts); }};
}

}  // namespace cairn::cli
