// Copy-on-write update of a B+tree (the commit's tree update): applies sorted mutations
// to the tree of one generation, re-encoding only the nodes on the paths the
// mutations touch, and returns the new root. New nodes are appended to a
// DataFileWriter (children before parents); untouched subtrees are kept by
// reference.
//
// Thread safety: stateless functions; as thread-safe as `read`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "cairn/kvstore/ocdbt/format/config.h"
#include "cairn/kvstore/ocdbt/io/data_file_writer.h"
#include "cairn/kvstore/ocdbt/io/reader.h"

namespace cairn::ocdbt {

// A staged mutation: the new value (already inline or already appended to
// the data file) or nullopt to delete.
struct BtreeMutation {
  std::string key;
  std::optional<LeafValue> value;
};

struct NewRoot {
  BtreeNodeReference root;  // Missing location for an empty tree
  uint8_t height = 0;
};

// Applies `mutations` (REQUIRES: sorted by key, keys unique) to the tree of
// `old_root` (nullopt or Missing = empty tree). Nodes are split to stay near
// config.max_decoded_node_bytes and below 2^20 entries, and compressed with
// config.compression. Errors: those of `read` and of decoding existing nodes.
Result<NewRoot> UpdateBtree(const std::optional<BtreeGenerationReference>& old_root,
                            const std::vector<BtreeMutation>& mutations, const Config& config,
                            const ReadObjectFn& read, DataFileWriter* out);

}  // namespace cairn::ocdbt
