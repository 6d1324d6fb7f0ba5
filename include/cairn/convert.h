// Converting a checkpoint of any format cairn reads (Orbax, AXLearn,
// safetensors: detected from what is stored) into another, streaming within
// a memory budget, and committing the destination last. `cairn convert` and
// `cairn.convert(...)` make this one call.
//
// Under a coordinator with more than one process, every process makes the
// same call: the processes split the arrays (each within its own budget),
// and the primary checks the destination, commits and verifies.
//
// Thread safety: Convert may be called from any thread; it runs its own
// worker threads. The progress callback is called from them, one call at a
// time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cairn/coordinator.h"
#include "cairn/interrupt.h"
#include "cairn/result.h"
#include "cairn/status.h"

namespace cairn {

// How far a conversion is, passed to ConvertRequest::progress now and then.
struct ConvertProgress {
  uint64_t bytes_done = 0;   // destination bytes written so far
  uint64_t bytes_total = 0;  // destination bytes the conversion writes
  size_t arrays_done = 0;    // arrays written completely so far
  size_t arrays_total = 0;   // arrays the conversion writes
};

struct ConvertRequest {
  std::string source;  // the checkpoint to read: a path or a kvstore URL (file:///..., s3://...)
  // Where to write: a directory (path or URL). For AXLearn the checkpoint
  // root, into which `step_XXXXXXXX/` is written; for safetensors the
  // directory of `model.safetensors` (or of the sharded set); for Orbax the
  // step directory.
  std::string dest;
  std::string to;    // destination format: one of ConvertDestinationFormats()
  std::string from;  // source format: "" (detected), "safetensors", "axlearn" or "orbax"
  std::optional<int64_t> step;  // the source's step (default: its latest committed); AXLearn destinations use it too
  bool overwrite = false;       // replace a committed destination instead of refusing it
  // How the caller's front end spells `overwrite`, named in the error that
  // refuses a committed destination ("pass --overwrite to replace it").
  std::string overwrite_option = "overwrite=True";
  uint64_t max_file_bytes = 0;  // safetensors: shard into files of at most this many bytes (0: one file)
  std::vector<std::string> include;  // keep only arrays whose path matches one of these globs (none: all)
  std::vector<std::string> exclude;  // drop arrays whose path matches one of these globs
  // {OLD, NEW}: a destination path starting with OLD starts with NEW
  // instead (the first rule that matches applies).
  std::vector<std::pair<std::string, std::string>> renames;
  // Keep only the model parameters of a training state (`--params-only`):
  // the same as include = {"params.*"} plus dropping the leading `params.`
  // (and a second one: MaxText's `params.params.decoder...`) from the
  // destination paths, before rename_preset and renames see them.
  bool params_only = false;
  // "" or one of ConvertRenamePresets(): a named table of renames from a
  // jax model's parameter names to another framework's (e.g. "gpt2": flax
  // GPT-2 to transformers' GPT2LMHeadModel), applied before `renames`.
  std::string rename_preset;
  // {GLOB, DTYPE}: arrays whose path matches GLOB are cast to the dtype
  // named DTYPE ("bfloat16", "float32", ...).
  std::vector<std::pair<std::string, std::string>> casts;
  uint64_t memory_budget = uint64_t{1} << 30;  // bytes in flight per process
  int threads = 0;                             // worker threads (0: from the cores)
  bool verify = false;  // re-read the destination after the commit and compare it with the source
  // Keep the arrays an interrupted run of the same conversion wrote
  // completely instead of writing them again.
  bool resume = true;
  std::function<void(const ConvertProgress&)> progress;  // may be empty
  // Called once before anything is written when the memory budget would
  // make the conversion slow (under 1 MiB and cutting chunks small), with a
  // message naming the recommended budget; may be empty.
  std::function<void(const std::string&)> warning;
  // The job's coordinator when several processes convert together (not
  // owned; null: this process alone). See environment.h for the one the
  // launcher asks for.
  Coordinator* coordinator = nullptr;
  // When requested (e.g. from a SIGINT handler), the conversion stops at its
  // next slab with StatusCode::kCancelled, before its commit; the message says how far
  // it got and whether a re-run resumes. May be null.
  const Interrupt* interrupt = nullptr;
};

struct ConvertResult {
  std::string source;         // the step / item / file actually read
  std::string source_format;  // "safetensors", "axlearn" or "orbax"
  std::string dest;           // where the checkpoint was written (the step directory, or the file)
  size_t arrays = 0;          // arrays converted
  size_t arrays_resumed = 0;  // of them, found complete from an interrupted run and not copied again
  uint64_t bytes_read = 0;     // source bytes read
  uint64_t bytes_written = 0;  // destination bytes written
  double seconds = 0;          // wall time of the conversion
  double verify_seconds = 0;   // of it, re-reading and comparing (ConvertRequest::verify)
  uint64_t peak_slab_bytes = 0;  // the most bytes in flight at once (within memory_budget)
};

// The destination formats, in the order `cairn convert --help` lists them:
// one per row of the conversion destinations' table.
std::vector<std::string> ConvertDestinationFormats();

// The rename presets ConvertRequest::rename_preset accepts, as
// {name, one-line description}, in the order --help lists them.
std::vector<std::pair<std::string, std::string>> ConvertRenamePresets();

// Checks the parts of `request` that need no store: that every cast names
// a dtype and that rename_preset names a preset. Convert makes the same
// check first.
// Errors: InvalidArgument naming the dtype or preset that is not one.
Status ValidateConvertRequest(const ConvertRequest& request);

// Converts request.source into request.dest. Every process of a
// coordinated conversion gets the same result.
// Errors: those of ValidateConvertRequest; NotFound when there is no
// checkpoint at the source (or no `step`); InvalidArgument for an unknown
// `to` or `from` (naming it and the supported ones); AlreadyExists when the
// destination holds a committed checkpoint and not `overwrite`;
// ResourceExhausted when an array's slab does not fit the memory budget;
// DataLoss when verification finds a difference; the store's errors, naming
// the key and URL.
Result<ConvertResult> Convert(const ConvertRequest& request);

}  // namespace cairn
