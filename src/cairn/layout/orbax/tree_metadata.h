// The Orbax PyTree metadata file `_METADATA` as a C++
// tree model: parse, emit, and rebuild the nested structure from each
// entry's `key_metadata` (never from the entry's key string).
//
//   {"tree_metadata": {"('a', '0')": {"key_metadata": [{"key": "a", "key_type": 2},
//                                                      {"key": "0", "key_type": 1}],
//                                     "value_metadata": {"value_type": "jax.Array",
//                                                        "skip_deserialize": false,
//                                                        "write_shape": [2, 4]}}},
//    "use_ocdbt": true, "use_zarr3": false,
//    "store_array_data_equal_to_fill_value": true, "custom_metadata": null}
//
// Param names (the key prefix of an array inside the item) join the key
// names with '.' without escaping, so distinct paths can collide
// (`{"a.b": x}` and `{"a": {"b": y}}`); CheckParamNames reports that.
//
// Thread safety: value types and pure functions.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/util/json.h"
#include "cairn/result.h"

namespace cairn::orbax {

enum class KeyType : int { kSequence = 1, kDict = 2 };

struct KeyEntry {
  std::string key;  // a dict key, or the decimal index in a list
  KeyType type = KeyType::kDict;
  bool operator==(const KeyEntry& o) const { return key == o.key && type == o.type; }
};

using KeyPath = std::vector<KeyEntry>;

// The longest key path cairn reads or writes (docs/limits.md). A tree as
// deep as its longest key path is built, freed and handed to Python level
// by level; `_METADATA` lists key paths flat, so without a limit a few
// hundred KB of file would nest the tree deeper than any stack.
inline constexpr size_t kMaxKeyPathLength = 256;

// InvalidArgument naming the path (its first keys) if it is longer than
// kMaxKeyPathLength.
Status CheckKeyPathLength(const KeyPath& path);

// Value types Orbax writes (`value_type`).
inline constexpr std::string_view kJaxArray = "jax.Array";
inline constexpr std::string_view kNumpyArray = "np.ndarray";
inline constexpr std::string_view kScalar = "scalar";
inline constexpr std::string_view kString = "string";
// Empty containers and None: skip_deserialize is true for these.
inline constexpr std::string_view kEmptyDict = "Dict";
inline constexpr std::string_view kEmptyList = "List";
inline constexpr std::string_view kEmptyTuple = "Tuple";
inline constexpr std::string_view kEmptyNamedTuple = "NamedTuple";
inline constexpr std::string_view kNone = "None";

// True for the value types stored as a Zarr array inside the item.
bool IsArrayValueType(std::string_view value_type);
// True for "Dict", "List", "Tuple", "NamedTuple", "None".
bool IsEmptyValueType(std::string_view value_type);

struct ValueMetadata {
  std::string value_type;
  bool skip_deserialize = false;
  std::optional<std::vector<int64_t>> write_shape;  // jax.Array leaves only
};

struct TreeEntry {
  KeyPath path;
  ValueMetadata value;
};

struct TreeMetadata {
  std::vector<TreeEntry> entries;  // in tree-flattening order
  std::optional<bool> use_ocdbt;   // absent in files older than 0.11.31
  bool use_zarr3 = false;
  bool store_array_data_equal_to_fill_value = false;
  Json custom_metadata;                              // null when absent
  std::optional<std::string> value_metadata_tree;    // kept verbatim when present
};

// '.'-joined key names: the array's key prefix (without the trailing '/').
std::string ParamName(const KeyPath& path);

// Python's str(tuple(names)): "('a', 'b')", "('a',)", "()". Only for the
// entry keys of `_METADATA` (humans and diffs read it, Orbax does not).
std::string KeyString(const KeyPath& path);

// Parses `_METADATA`. `where` names the file in errors. Errors:
// InvalidArgument for malformed JSON, a missing `tree_metadata`, an entry
// without `key_metadata`/`value_metadata`, a key_type other than 1 or 2, a
// sequence key that is not a decimal index, a key path longer than
// kMaxKeyPathLength, JSON nested deeper than kMaxJsonDepth.
Result<TreeMetadata> ParseTreeMetadata(std::string_view text, std::string_view where);

// Serializes as Orbax does (json.dumps layout, entries in the given order).
std::string EmitTreeMetadata(const TreeMetadata& metadata);

// InvalidArgument naming both key paths if two entries share a param name,
// or if one entry's path is a strict prefix of another's.
Status CheckParamNames(const std::vector<TreeEntry>& entries);

// The nested structure rebuilt from key_metadata.
struct TreeNode {
  enum class Kind { kDict, kList, kLeaf };
  Kind kind = Kind::kDict;
  // kDict: children by key in first-seen order; kList: children by index.
  std::vector<std::pair<std::string, std::unique_ptr<TreeNode>>> children;
  const TreeEntry* leaf = nullptr;  // kLeaf: the entry (owned by the metadata)
};

// Builds the tree of `metadata.entries`. An entry whose value type is an
// empty container becomes an empty kDict/kList node; "None" stays a leaf.
// A list's indices must be exactly 0..n-1. A single entry with an empty
// path is a bare top-level leaf. Errors (InvalidArgument, naming the key
// path): a node used both as dict and list, or as leaf and container,
// duplicate paths, gaps in list indices, a key path longer than
// kMaxKeyPathLength. Time linear in the total length of the key paths
// (plus sorting each list's indices).
Result<std::unique_ptr<TreeNode>> BuildTree(const TreeMetadata& metadata);

}  // namespace cairn::orbax
