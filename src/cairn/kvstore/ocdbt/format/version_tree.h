// The version tree (docs/formats/ocdbt.md): every generation's B+tree root, reachable from
// the manifest through inline entries and version-tree nodes.
//
// Pure functions: no I/O, no threads. Thread safety: value types.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "cairn/kvstore/ocdbt/format/btree.h"
#include "cairn/kvstore/ocdbt/format/data_file.h"
#include "cairn/kvstore/ocdbt/format/envelope.h"

namespace cairn::ocdbt {

// One generation: the root of its B+tree (Missing for an empty tree).
struct BtreeGenerationReference {
  BtreeNodeReference root;
  uint64_t generation_number = 0;
  uint8_t root_height = 0;
  uint64_t commit_time = 0;  // ns since the Unix epoch
  bool operator==(const BtreeGenerationReference&) const = default;
};

// A reference to a version-tree node of `height` covering generations up to
// `generation_number`.
struct VersionNodeReference {
  IndirectDataReference location;
  uint64_t generation_number = 0;  // latest generation in the subtree
  uint8_t height = 0;              // of the referenced node
  uint64_t num_generations = 0;
  uint64_t commit_time = 0;  // earliest commit time in the subtree
  bool operator==(const VersionNodeReference&) const = default;
};

struct VersionTreeNode {
  uint8_t height = 0;
  uint8_t arity_log2 = 4;
  std::vector<BtreeGenerationReference> leaf_entries;     // height == 0
  std::vector<VersionNodeReference> interior_entries;     // height > 0 (children height-1)
};

// 63 / arity_log2 - 1: the largest height a version-tree node may have.
inline uint8_t MaxVersionTreeHeight(uint8_t arity_log2) { return 63 / arity_log2 - 1; }

// The range of generations [min, max] a version node of `height` referenced
// from the manifest may cover when the latest generation is `latest`.
struct VersionNodeRange {
  uint8_t height;
  uint64_t min_generation;
  uint64_t max_generation;
};
// Ranges in increasing height (1, 2, ...); TensorStore's
// ForEachManifestVersionTreeNodeRef.
std::vector<VersionNodeRange> ManifestVersionNodeRanges(uint64_t latest, uint8_t arity_log2);

// Column-major entry lists, shared by nodes and the manifest. The encoders
// add their file ids to `table` first (AddIds), then write (after Encode).
void AddIds(const std::vector<BtreeGenerationReference>& entries, DataFileTableBuilder* table);
void AddIds(const std::vector<VersionNodeReference>& entries, DataFileTableBuilder* table);
void EncodeLeafEntries(const std::vector<BtreeGenerationReference>& entries,
                       const DataFileTableBuilder& table, Buffer* out);
// `with_heights`: append the per-entry height column (manifest only).
void EncodeInteriorEntries(const std::vector<VersionNodeReference>& entries,
                           const DataFileTableBuilder& table, bool with_heights, Buffer* out);

// Decoders validate (counts <= 2^arity_log2, generation order and
// blocks, Missing roots with zero statistics, data references).
Status DecodeLeafEntries(FieldReader& r, const std::vector<DataFileId>& table,
                         uint8_t arity_log2, std::vector<BtreeGenerationReference>* entries);
// `node_height` > 0: entries of an interior node (children have
// node_height - 1). `node_height` == 0: the manifest's version_nodes (with a
// height column); ranges are then checked by the manifest decoder.
Status DecodeInteriorEntries(FieldReader& r, const std::vector<DataFileId>& table,
                             uint8_t arity_log2, uint8_t node_height,
                             std::vector<VersionNodeReference>* entries);

// Whole nodes (stored in data files).
// Errors: InvalidArgument for an empty or over-full node.
Result<Buffer> EncodeVersionTreeNode(const VersionTreeNode& node,
                                     const CompressionOptions& compression);
// Errors: DataLoss naming `what`, including an arity different from
// `arity_log2`, a height above MaxVersionTreeHeight or a decoded body over
// `max_body_bytes`.
Result<VersionTreeNode> DecodeVersionTreeNode(ByteView encoded, uint8_t arity_log2,
                                              std::string_view transitive_path,
                                              std::string_view what,
                                              uint64_t max_body_bytes = kMaxDecodedObjectBytes);

}  // namespace cairn::ocdbt
