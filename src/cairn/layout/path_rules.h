// Selecting and renaming arrays by path, the one matcher `cairn convert`
// (engine/convert/convert_plan.h) and `cairn diff` (inspect/diff.h) share:
// fnmatch(3) globs ('*' also matches '.' and '/') and leading-prefix
// renames.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <vector>

namespace cairn::layout {

// A leading `from` of a path becomes `to`.
struct RenameRule {
  std::string from;
  std::string to;
};

// fnmatch(3) without flags: '*' also matches '.' and '/'.
bool GlobMatches(const std::string& glob, const std::string& path);

// Kept: `path` matches some include (or includes are empty) and no exclude.
bool PathSelected(const std::vector<std::string>& include, const std::vector<std::string>& exclude,
                  const std::string& path);

// `path` with the first rule whose `from` leads it applied; unchanged when
// none does.
std::string ApplyRenames(const std::vector<RenameRule>& renames, const std::string& path);

}  // namespace cairn::layout
