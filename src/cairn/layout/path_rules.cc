#include "cairn/layout/path_rules.h"

#include <fnmatch.h>

#include <algorithm>

namespace cairn::layout {

bool GlobMatches(const std::string& glob, const std::string& path) {
  return fnmatch(glob.c_str(), path.c_str(), 0) == 0;
}

bool PathSelected(const std::vector<std::string>& include, const std::vector<std::string>& exclude,
                  const std::string& path) {
  auto any = [&path](const std::vector<std::string>& globs) {
    return std::any_of(globs.begin(), globs.end(), [&](const std::string& g) { return GlobMatches(g, path); });
  };
  return (include.empty() || any(include)) && !any(exclude);
}

std::string ApplyRenames(const std::vector<RenameRule>& renames, const std::string& path) {
  for (const RenameRule& r : renames) {
    if (r.suffix) {
      if (path.size() >= r.from.size() &&
          path.compare(path.size() - r.from.size(), r.from.size(), r.from) == 0) {
        return path.substr(0, path.size() - r.from.size()) + r.to;
      }
    } else if (path.compare(0, r.from.size(), r.from) == 0) {
      return r.to + path.substr(r.from.size());
    }
  }
  return path;
}

}  // namespace cairn::layout
