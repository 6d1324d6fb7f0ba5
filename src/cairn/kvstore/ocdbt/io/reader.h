// Read-side algorithms over an OCDBT database (§1.8.4 version lookup, §1.10
// point lookup, prefix listing), independent of where the bytes live: every
// object is fetched through a ReadObjectFn.
//
// Each function reads at most one node per tree level along each path it
// follows and validates every node against its parent (height, key bounds,
// latest generation).
//
// Thread safety: the functions keep no state; they are as thread-safe as the
// ReadObjectFn passed in.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/kvstore/ocdbt/format/btree.h"
#include "cairn/kvstore/ocdbt/format/manifest.h"
#include "cairn/util/buffer.h"
#include "cairn/util/result.h"

namespace cairn::ocdbt {

// Returns exactly the bytes [offset, offset + length) of the data file
// `file` (its path under the database root is file.FullPath()). Must return
// DataLoss (not NotFound) for a missing file or a short read.
using ReadObjectFn =
    std::function<Result<Buffer>(const DataFileId& file, uint64_t offset, uint64_t length)>;

// Reads and decodes the B+tree node at `ref`, checking it has `height`.
Result<BtreeNode> ReadBtreeNode(const IndirectDataReference& ref, uint8_t height,
                                const ReadObjectFn& read);

// The reference of generation `generation` (0 = the latest), or nullopt when
// the database has no such generation. Errors: DataLoss for corrupt or
// inconsistent version-tree nodes; errors of `read`.
Result<std::optional<BtreeGenerationReference>> FindGeneration(const Manifest& manifest,
                                                               uint64_t generation,
                                                               const ReadObjectFn& read);

// The value of `key` in the tree of `root`, or nullopt when absent.
Result<std::optional<LeafValue>> FindKey(const BtreeGenerationReference& root,
                                         std::string_view key, const ReadObjectFn& read);

// Looks up many keys in one descent: every node on the paths to them is read
// once. REQUIRES: `keys` sorted (bytewise), duplicates allowed. Calls
// `fn(i, value)` (value nullptr when keys[i] is absent) for every i, in
// increasing i.
using FoundKeyFn = std::function<Status(size_t index, const LeafValue* value)>;
Status FindKeys(const BtreeGenerationReference& root, const std::vector<std::string>& keys,
                const ReadObjectFn& read, const FoundKeyFn& fn);

// Calls `fn(full_key, value)` for every key starting with `prefix`, in
// increasing key order; stops at (and returns) the first error of `fn`.
using LeafEntryFn = std::function<Status(std::string_view key, const LeafValue& value)>;
Status ListEntries(const BtreeGenerationReference& root, std::string_view prefix,
                   const ReadObjectFn& read, const LeafEntryFn& fn);

// The bytes [begin, end) of a value (relative to the value's start).
// REQUIRES: begin <= end <= value.size().
Result<Buffer> ReadValueRange(const LeafValue& value, uint64_t begin, uint64_t end,
                              const ReadObjectFn& read);

}  // namespace cairn::ocdbt
