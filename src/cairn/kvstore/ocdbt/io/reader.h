// Read-side algorithms over an OCDBT database (version lookup,
// point lookup, prefix listing), independent of where the bytes live: every
// object is fetched through a ReadObjectFn.
//
// Each function reads at most one node per tree level along each path it
// follows and validates every node against its parent (height, key bounds,
// latest generation). Work is bounded by the stored bytes, whatever they
// say: no node larger than ReadLimits::max_node_bytes is read or decoded,
// and a walk over many children (FindKeys, ListEntries) fails with DataLoss
// when it reaches the same node a second time (interior entries that all
// point at one child would otherwise multiply the work per level).
//
// Thread safety: the functions keep no state; they are as thread-safe as the
// ReadObjectFn passed in.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "cairn/kvstore/ocdbt/format/btree.h"
#include "cairn/kvstore/ocdbt/format/manifest.h"
#include "cairn/util/buffer.h"
#include "cairn/result.h"

namespace cairn::ocdbt {

// Returns exactly the bytes [offset, offset + length) of the data file
// `file` (its path under the database root is file.FullPath()). Must return
// DataLoss (not NotFound) for a missing file or a short read.
using ReadObjectFn =
    std::function<Result<Buffer>(const DataFileId& file, uint64_t offset, uint64_t length)>;

// Decoded B+tree nodes by location. Data files are never rewritten, so a
// node read once stays valid for the life of the database; readers that
// walk the same tree again and again (a restore's many lookups) decode each
// node once. Bounded: when the encoded bytes of the nodes held would pass
// `max_bytes`, the cache is emptied first.
//
// Concurrent misses of one node share one read (FindOrRead): many lookups
// starting at once over a remote store (a restore's chunk reads) would
// otherwise each fetch the root and inner nodes themselves.
//
// Thread safety: all methods may be called concurrently.
class NodeCache {
 public:
  explicit NodeCache(uint64_t max_bytes = uint64_t{64} << 20) : max_bytes_(max_bytes) {}
  std::shared_ptr<const BtreeNode> Find(const IndirectDataReference& ref) const;
  void Insert(const IndirectDataReference& ref, std::shared_ptr<const BtreeNode> node);
  // The cached node at `ref`, else the result of `read`, which is cached. A
  // caller that misses while another one reads the same node waits for that
  // read instead of starting its own (after a failed read, it reads itself).
  Result<std::shared_ptr<const BtreeNode>> FindOrRead(
      const IndirectDataReference& ref, const std::function<Result<BtreeNode>()>& read);
  // Reads started by FindOrRead so far, and callers waiting now for a read
  // another caller started (for tests).
  uint64_t reads() const;
  uint64_t waiting() const;

 private:
  using Key = std::tuple<DataFileId, uint64_t, uint64_t>;  // the node's children depend on base_path too
  void InsertLocked(const Key& key, uint64_t length, std::shared_ptr<const BtreeNode> node);
  const uint64_t max_bytes_;
  mutable std::mutex mu_;
  std::condition_variable read_done_;
  std::map<Key, std::shared_ptr<const BtreeNode>> nodes_;
  std::set<Key> reading_;  // nodes a FindOrRead is reading now
  uint64_t bytes_ = 0;
  uint64_t reads_ = 0;
  uint64_t waiting_ = 0;
};

// Bounds on what a read may decode, and where decoded nodes are kept.
struct ReadLimits {
  // Largest node (B+tree or version tree) body, encoded or decoded.
  uint64_t max_node_bytes = kMaxDecodedObjectBytes;
  // B+tree nodes are looked up here before they are read, and kept here
  // after (null: every node is read and decoded each time).
  NodeCache* node_cache = nullptr;
};

// The limits for a database with `config`: its max_decoded_node_bytes plus
// room for the few entries a writer puts in a node however large they are
// (4 entries of a maximal key and inline value), at most `cap`; `cap` alone
// when the config says 0 (unlimited).
ReadLimits NodeReadLimits(const Config& config, uint64_t cap);

// Reads and decodes the B+tree node at `ref`, checking it has `height`.
Result<BtreeNode> ReadBtreeNode(const IndirectDataReference& ref, uint8_t height,
                                const ReadObjectFn& read, const ReadLimits& limits = {});

// The reference of generation `generation` (0 = the latest), or nullopt when
// the database has no such generation. Errors: DataLoss for corrupt or
// inconsistent version-tree nodes; errors of `read`.
Result<std::optional<BtreeGenerationReference>> FindGeneration(const Manifest& manifest,
                                                               uint64_t generation,
                                                               const ReadObjectFn& read,
                                                               const ReadLimits& limits = {});

// The value of `key` in the tree of `root`, or nullopt when absent.
Result<std::optional<LeafValue>> FindKey(const BtreeGenerationReference& root,
                                         std::string_view key, const ReadObjectFn& read,
                                         const ReadLimits& limits = {});

// Looks up many keys in one descent: every node on the paths to them is read
// once. REQUIRES: `keys` sorted (bytewise), duplicates allowed. Calls
// `fn(i, value)` (value nullptr when keys[i] is absent) for every i, in
// increasing i.
using FoundKeyFn = std::function<Status(size_t index, const LeafValue* value)>;
Status FindKeys(const BtreeGenerationReference& root, const std::vector<std::string>& keys,
                const ReadObjectFn& read, const FoundKeyFn& fn, const ReadLimits& limits = {});

// Calls `fn(full_key, value)` for every key starting with `prefix`, in
// increasing key order; stops at (and returns) the first error of `fn`.
using LeafEntryFn = std::function<Status(std::string_view key, const LeafValue& value)>;
Status ListEntries(const BtreeGenerationReference& root, std::string_view prefix,
                   const ReadObjectFn& read, const LeafEntryFn& fn,
                   const ReadLimits& limits = {});

// The bytes [begin, end) of a value (relative to the value's start).
// REQUIRES: begin <= end <= value.size().
Result<Buffer> ReadValueRange(const LeafValue& value, uint64_t begin, uint64_t end,
                              const ReadObjectFn& read);

}  // namespace cairn::ocdbt
