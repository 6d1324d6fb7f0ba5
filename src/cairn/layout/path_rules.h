// Selecting and renaming arrays by path, the one matcher `cairn convert`
// (engine/convert/convert_plan.h) and `cairn diff` (inspect/diff.h) share:
// fnmatch(3) globs ('*' also matches '.' and '/') and renames of a leading
// (or, for presets, a trailing) part.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

namespace cairn::layout {

// A leading `from` of a path becomes `to`; with `suffix`, a trailing one
// does (the rename presets' `.kernel` -> `.weight`).
struct RenameRule {
  std::string from;
  std::string to;
  bool suffix = false;
};

// fnmatch(3) without flags: '*' also matches '.' and '/'.
bool GlobMatches(const std::string& glob, const std::string& path);

// Kept: `path` matches some include (or includes are empty) and no exclude.
bool PathSelected(const std::vector<std::string>& include, const std::vector<std::string>& exclude,
                  const std::string& path);

// `path` with the first rule that matches it applied; unchanged when none
// does.
std::string ApplyRenames(const std::vector<RenameRule>& renames, const std::string& path);

}  // namespace cairn::layout
