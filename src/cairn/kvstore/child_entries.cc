#include "cairn/kvstore/child_entries.h"

#include <algorithm>

namespace cairn {

void ChildEntries::Add(std::string_view name, ChildEntry::Kind kind) {
  if (name.empty()) return;
  ChildEntry e{std::string(name), kind};
  if (!entries_.empty() && entries_.back() == e) return;  // keys of one child come together
  entries_.push_back(std::move(e));
}

void ChildEntries::AddKey(std::string_view key) {
  if (key.size() <= prefix_.size() || key.compare(0, prefix_.size(), prefix_) != 0) return;
  std::string_view rest = key.substr(prefix_.size());
  size_t slash = rest.find('/');
  Add(rest.substr(0, slash),
      slash == std::string_view::npos ? ChildEntry::Kind::kKey : ChildEntry::Kind::kPrefix);
}

void ChildEntries::AddPrefix(std::string_view common_prefix) {
  if (common_prefix.size() <= prefix_.size() || common_prefix.back() != '/' ||
      common_prefix.compare(0, prefix_.size(), prefix_) != 0) {
    return;
  }
  std::string_view rest = common_prefix.substr(prefix_.size());
  rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) return;
  Add(rest, ChildEntry::Kind::kPrefix);
}

std::vector<ChildEntry> ChildEntries::Sorted() && {
  // Entries of one name need not be adjacent in key order ("a-c" sorts
  // between "a" and "a/b"): sort by name, key before prefix, drop repeats.
  std::sort(entries_.begin(), entries_.end(), [](const ChildEntry& a, const ChildEntry& b) {
    return a.name != b.name ? a.name < b.name : a.kind < b.kind;
  });
  entries_.erase(std::unique(entries_.begin(), entries_.end()), entries_.end());
  return std::move(entries_);
}

}  // namespace cairn
