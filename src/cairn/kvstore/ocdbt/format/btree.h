// B+tree nodes (docs/formats/ocdbt.md): leaf entries map keys to inline or out-of-line values;
// interior entries point at child nodes one level down.
//
// Keys stored in a node are relative to the node's implicit prefix (the
// concatenation of the subtree_common_prefix parts of the entries on the path
// from the root); the node itself does not know its prefix.
//
// Pure functions: no I/O, no threads. Thread safety: value types.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/kvstore/ocdbt/format/data_file.h"
#include "cairn/kvstore/ocdbt/format/envelope.h"
#include "cairn/result.h"

namespace cairn::ocdbt {

inline constexpr uint32_t kMaxNodeEntries = uint32_t{1} << 20;
inline constexpr uint64_t kMaxKeyLength = 65535;

struct BtreeNodeStatistics {
  uint64_t num_keys = 0;
  uint64_t num_tree_bytes = 0;
  uint64_t num_indirect_value_bytes = 0;

  BtreeNodeStatistics& operator+=(const BtreeNodeStatistics& o) {
    num_keys += o.num_keys;
    num_tree_bytes += o.num_tree_bytes;
    num_indirect_value_bytes += o.num_indirect_value_bytes;
    return *this;
  }
  bool operator==(const BtreeNodeStatistics&) const = default;
};

struct BtreeNodeReference {
  IndirectDataReference location;
  BtreeNodeStatistics statistics;
  bool operator==(const BtreeNodeReference&) const = default;
};

// A value: its bytes when inline, else where they are.
struct LeafValue {
  bool is_inline = true;
  std::string inline_value;
  IndirectDataReference ref;

  uint64_t size() const { return is_inline ? inline_value.size() : ref.length; }
  bool operator==(const LeafValue&) const = default;
};

struct LeafEntry {
  std::string key;  // relative to the node's implicit prefix
  LeafValue value;
  bool operator==(const LeafEntry&) const = default;
};

struct InteriorEntry {
  std::string key;  // inclusive lower bound of the child, relative to the node's prefix
  // key[0, subtree_common_prefix_length) is appended to the child's prefix.
  uint32_t subtree_common_prefix_length = 0;
  BtreeNodeReference node;
  bool operator==(const InteriorEntry&) const = default;
};

struct BtreeNode {
  uint8_t height = 0;  // 0 = leaf
  std::vector<LeafEntry> leaf_entries;          // when height == 0
  std::vector<InteriorEntry> interior_entries;  // when height > 0
};

// Encodes `node` (data file table stored relative to the root, i.e. the node
// must be referenced with an empty base path). Keys are prefix-compressed.
// Errors: InvalidArgument when the node has 0 or more than 2^20 entries,
// keys that are not strictly increasing or longer than 65535 bytes, or an
// inline value over 1 MiB.
Result<Buffer> EncodeBtreeNode(const BtreeNode& node, const CompressionOptions& compression);

// Decodes and validates the exact bytes of a node. `transitive_path` is the
// resolved base path of the reference used to reach it. Errors: DataLoss
// naming `what` (envelope, counts, key order, lengths, value kinds, refs),
// including a decoded body over `max_body_bytes`.
Result<BtreeNode> DecodeBtreeNode(ByteView encoded, std::string_view transitive_path,
                                  std::string_view what,
                                  uint64_t max_body_bytes = kMaxDecodedObjectBytes);

}  // namespace cairn::ocdbt
