// Orbax step directories (orbax-layout.md §1.2, §1.3) and the commit
// protocol for local paths.
//
// Step names: `<step>`, `<prefix>_<step>`, optionally zero-padded to a
// fixed width (`step_0023`). A step directory counts as finalized when its
// name has no `.orbax-checkpoint-tmp` and, if the caller requires commit
// files (Orbax's COMMIT_FILE mode, gs:// paths), it holds
// `commit_success.txt`.
//
// Commit protocol (AtomicRenameTemporaryPath; the steps Orbax takes):
//   1. BeginCommit: remove any leftover `<final>.orbax-checkpoint-tmp`, then
//      create it empty. Everything is written inside it.
//   2. The caller writes and syncs the data and metadata files (through
//      KvStores, which sync each file before returning).
//   3. FinishCommit: write `commit_success.txt` into the tmp directory
//      (synced), sync the tmp directory, rename it to `<final>` and sync the
//      parent directory. A reader that sees `<final>` sees everything.
// Nested items (`<step>.tmp/<item>.tmp`) are committed innermost first.
//
// These functions touch the local file system directly (directory listing,
// rename and fsync are not KvStore operations). Thread safety: pure
// functions over the file system; callers serialize commits of one path.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/util/result.h"

namespace cairn::orbax {

inline constexpr std::string_view kTmpSuffix = ".orbax-checkpoint-tmp";

struct StepNameFormat {
  std::string prefix;                  // empty: names are bare numbers
  std::optional<int> fixed_length;     // zero-pad the number to this width
};

// `23`, `0023`, `step_23`, `step_0023`.
std::string StepName(int64_t step, const StepNameFormat& format);

// The step of `name` under `format`, or nullopt when the name does not
// follow it (Orbax's discovery regex: no leading zeros unless fixed width,
// at least `fixed_length` digits).
std::optional<int64_t> ParseStepName(std::string_view name, const StepNameFormat& format);

// True when `name` contains `.orbax-checkpoint-tmp` (any suffix after it).
bool IsTmpName(std::string_view name);

struct StepInfo {
  int64_t step = 0;
  std::string path;  // absolute directory path
};

// Finalized steps under `root`, sorted by step. `require_commit_file`
// skips directories without commit_success.txt. NotFound when `root` does
// not exist; Unavailable for listing errors.
Result<std::vector<StepInfo>> ListSteps(const std::string& root, const StepNameFormat& format,
                                        bool require_commit_file = false);

// Tries every common format (bare, any `<prefix>_`, fixed width) for
// directories under `root` that look like Orbax steps: finalized and holding
// `_CHECKPOINT_METADATA` or an item directory. Sorted by step.
Result<std::vector<StepInfo>> DiscoverSteps(const std::string& root);

// Step 1 of the protocol. Returns the tmp path. AlreadyExists when `final`
// exists.
Result<std::string> BeginCommit(const std::string& final_path);

// Step 3 of the protocol. `final_path` is what `tmp_path` becomes.
Status FinishCommit(const std::string& tmp_path, const std::string& final_path);

// Reads a whole small file (metadata). NotFound when absent.
Result<std::string> ReadSmallFile(const std::string& path);
// Writes a small file durably (tmp file + fsync + rename + dir fsync).
Status WriteSmallFile(const std::string& path, std::string_view contents);

bool IsDirectory(const std::string& path);
bool IsRegularFile(const std::string& path);
// Names of the entries of directory `path` (not recursive), sorted.
Result<std::vector<std::string>> ListDirectory(const std::string& path);

// Nanoseconds since the Unix epoch.
int64_t NowNanos();

}  // namespace cairn::orbax
