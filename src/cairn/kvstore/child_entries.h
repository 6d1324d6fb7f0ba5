// ChildEntries: the entries KvStore::ListChildren returns, gathered from a
// listing. Stores without directories list either every key below the prefix
// (the default ListChildren, from List) or, where the store can group keys
// at the next '/' (S3's and GCS's `delimiter=/`), the keys directly below
// the prefix plus one common prefix per child that has keys further down.
// Both feed this, so every store returns the same entries for the same keys.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cairn/kvstore/kvstore.h"

namespace cairn {

class ChildEntries {
 public:
  // `prefix`: the prefix being listed ("" or ending in '/').
  explicit ChildEntries(std::string_view prefix) : prefix_(prefix) {}

  // A key below the prefix: its first component after the prefix is a key
  // child when nothing follows it, else a prefix child. Keys not below the
  // prefix and empty components ("p//x", or the key "p/" itself, which other
  // tools create as folder markers) are skipped.
  void AddKey(std::string_view key);
  // A common prefix `prefix + name + "/"` (what a delimited listing
  // returns): a prefix child. Others are skipped as in AddKey.
  void AddPrefix(std::string_view common_prefix);

  // Sorted by name, a key before a prefix of the same name, no repeats.
  std::vector<ChildEntry> Sorted() &&;

 private:
  void Add(std::string_view name, ChildEntry::Kind kind);

  std::string prefix_;
  std::vector<ChildEntry> entries_;
};

}  // namespace cairn
