#include "cairn/kvstore/ocdbt/io/reader.h"

#include <algorithm>
#include <set>
#include <tuple>

namespace cairn::ocdbt {
namespace {

// Room for the few entries a writer must put in one node whatever their size
// (a leaf needs 1, an interior node 2, a merged tail one more).
constexpr uint64_t kEntriesAboveLimit = 4;
constexpr uint64_t kEntryOverheadBytes = 1024;

// Checks a node reference's length against the limit before anything is
// read (an encoded object is at most a little larger than its body).
Status CheckNodeLength(const IndirectDataReference& ref, const ReadLimits& limits,
                       const std::string& what) {
  const uint64_t max_encoded = limits.max_node_bytes + limits.max_node_bytes / 64 + 1024;
  if (ref.length > max_encoded) {
    return DataLossError(what + ": " + std::to_string(ref.length) +
                         " bytes, over the node size limit of " +
                         std::to_string(limits.max_node_bytes));
  }
  return Status::OK();
}

// One walk over many children: remembers every node read, so a node that
// two interior entries point at is detected instead of read again.
struct Walk {
  const ReadObjectFn& read;
  const ReadLimits& limits;
  std::set<std::tuple<std::string, uint64_t, uint64_t>> seen;

  Status Visit(const IndirectDataReference& ref) {
    if (!seen.emplace(ref.file_id.FullPath(), ref.offset, ref.length).second) {
      return DataLossError("b+tree node " + ref.ToString() +
                           " is referenced twice in one tree (every node has one parent)");
    }
    return Status::OK();
  }
};

bool StartsWith(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(0, p.size()) == p;
}

using NodePtr = std::shared_ptr<const BtreeNode>;

// ReadBtreeNode through limits.node_cache (when set).
Result<NodePtr> ReadSharedNode(const IndirectDataReference& ref, uint8_t height,
                               const ReadObjectFn& read, const ReadLimits& limits) {
  if (limits.node_cache != nullptr) {
    CAIRN_ASSIGN_OR_RETURN(NodePtr node, limits.node_cache->FindOrRead(ref, [&] {
      return ReadBtreeNode(ref, height, read, limits);
    }));
    // A node cached by a walk that expected another height (the same bytes
    // referenced at two levels of a corrupt tree).
    if (node->height != height) {
      return DataLossError("b+tree node " + ref.ToString() + ": height " +
                           std::to_string(node->height) + ", expected " + std::to_string(height));
    }
    return node;
  }
  CAIRN_ASSIGN_OR_RETURN(BtreeNode node, ReadBtreeNode(ref, height, read, limits));
  return NodePtr(std::make_shared<const BtreeNode>(std::move(node)));
}

// Reads a node and checks its first key against the parent's lower bound.
Result<NodePtr> ReadChild(const IndirectDataReference& ref, uint8_t height,
                          std::string_view inclusive_min, const ReadObjectFn& read,
                          const ReadLimits& limits) {
  CAIRN_ASSIGN_OR_RETURN(NodePtr shared, ReadSharedNode(ref, height, read, limits));
  const BtreeNode& node = *shared;
  std::string_view first = height == 0 ? std::string_view(node.leaf_entries.front().key)
                                       : std::string_view(node.interior_entries.front().key);
  if (first < inclusive_min) {
    return DataLossError("b+tree node " + ref.ToString() +
                         ": first key is below the bound its parent gives");
  }
  return shared;
}

Result<VersionTreeNode> ReadVersionNode(const VersionNodeReference& ref, uint8_t arity_log2,
                                        const ReadObjectFn& read, const ReadLimits& limits) {
  std::string what = "version tree node " + ref.location.ToString();
  CAIRN_RETURN_IF_ERROR(CheckNodeLength(ref.location, limits, what));
  CAIRN_ASSIGN_OR_RETURN(Buffer bytes,
                         read(ref.location.file_id, ref.location.offset, ref.location.length));
  CAIRN_ASSIGN_OR_RETURN(VersionTreeNode node,
                         DecodeVersionTreeNode(bytes.view(), arity_log2,
                                               ref.location.file_id.base_path, what,
                                               limits.max_node_bytes));
  if (node.height != ref.height) {
    return DataLossError(what + ": height " + std::to_string(node.height) + ", expected " +
                         std::to_string(ref.height));
  }
  uint64_t last = node.height == 0 ? node.leaf_entries.back().generation_number
                                   : node.interior_entries.back().generation_number;
  if (last != ref.generation_number) {
    return DataLossError(what + ": latest generation " + std::to_string(last) +
                         ", expected " + std::to_string(ref.generation_number));
  }
  return node;
}

std::optional<BtreeGenerationReference> FindInLeaf(
    const std::vector<BtreeGenerationReference>& entries, uint64_t generation) {
  auto it = std::lower_bound(
      entries.begin(), entries.end(), generation,
      [](const BtreeGenerationReference& e, uint64_t g) { return e.generation_number < g; });
  if (it == entries.end() || it->generation_number != generation) return std::nullopt;
  return *it;
}

Status ListRecursive(const BtreeNode& node, const std::string& node_prefix,
                     std::string_view prefix, Walk& walk, const LeafEntryFn& fn) {
  if (node.height == 0) {
    std::string full;
    for (const auto& e : node.leaf_entries) {
      full = node_prefix;
      full += e.key;
      if (StartsWith(full, prefix)) {
        CAIRN_RETURN_IF_ERROR(fn(full, e.value));
      } else if (std::string_view(full) > prefix) {
        return Status::OK();  // past every key with the prefix
      }
    }
    return Status::OK();
  }
  const auto& es = node.interior_entries;
  for (size_t i = 0; i < es.size(); ++i) {
    std::string lo = node_prefix + es[i].key;
    // Past the prefix range: lo > prefix and lo does not start with it.
    if (std::string_view(lo) > prefix && !StartsWith(lo, prefix)) break;
    if (i + 1 < es.size()) {
      std::string hi = node_prefix + es[i + 1].key;
      if (std::string_view(hi) <= prefix) continue;  // child entirely below
    }
    std::string child_prefix =
        node_prefix + es[i].key.substr(0, es[i].subtree_common_prefix_length);
    if (!StartsWith(child_prefix, prefix) && !StartsWith(prefix, child_prefix)) continue;
    CAIRN_RETURN_IF_ERROR(walk.Visit(es[i].node.location));
    CAIRN_ASSIGN_OR_RETURN(
        NodePtr child,
        ReadChild(es[i].node.location, node.height - 1,
                  std::string_view(es[i].key).substr(es[i].subtree_common_prefix_length),
                  walk.read, walk.limits));
    CAIRN_RETURN_IF_ERROR(ListRecursive(*child, child_prefix, prefix, walk, fn));
  }
  return Status::OK();
}

// One pending lookup of FindKeys: keys[index] relative to the node's prefix.
struct Pending {
  size_t index;
  std::string_view rest;
};

Status FindKeysIn(const BtreeNode& node, std::vector<Pending> pending, Walk& walk,
                  const FoundKeyFn& fn) {
  if (node.height == 0) {
    const auto& ls = node.leaf_entries;
    for (const Pending& p : pending) {
      auto it = std::lower_bound(ls.begin(), ls.end(), p.rest,
                                 [](const LeafEntry& e, std::string_view k) { return e.key < k; });
      CAIRN_RETURN_IF_ERROR(
          fn(p.index, (it != ls.end() && it->key == p.rest) ? &it->value : nullptr));
    }
    return Status::OK();
  }
  const auto& es = node.interior_entries;
  size_t i = 0;
  while (i < pending.size()) {
    auto it = std::upper_bound(
        es.begin(), es.end(), pending[i].rest,
        [](std::string_view k, const InteriorEntry& e) { return k < e.key; });
    if (it == es.begin()) {
      CAIRN_RETURN_IF_ERROR(fn(pending[i].index, nullptr));
      ++i;
      continue;
    }
    const InteriorEntry& e = *(it - 1);
    // The keys below the next child's bound all belong to child e.
    size_t end = i + 1;
    while (end < pending.size() && (it == es.end() || pending[end].rest < it->key)) ++end;
    std::string_view common = std::string_view(e.key).substr(0, e.subtree_common_prefix_length);
    std::vector<Pending> inner;
    for (size_t j = i; j < end; ++j) {
      if (StartsWith(pending[j].rest, common)) {
        inner.push_back({pending[j].index, pending[j].rest.substr(common.size())});
      }
    }
    if (!inner.empty()) {
      CAIRN_RETURN_IF_ERROR(walk.Visit(e.node.location));
      CAIRN_ASSIGN_OR_RETURN(
          NodePtr child,
          ReadChild(e.node.location, node.height - 1,
                    std::string_view(e.key).substr(e.subtree_common_prefix_length), walk.read,
                    walk.limits));
      CAIRN_RETURN_IF_ERROR(FindKeysIn(*child, std::move(inner), walk, fn));
    }
    for (size_t j = i; j < end; ++j) {
      if (!StartsWith(pending[j].rest, common)) {
        CAIRN_RETURN_IF_ERROR(fn(pending[j].index, nullptr));
      }
    }
    i = end;
  }
  return Status::OK();
}

}  // namespace

std::shared_ptr<const BtreeNode> NodeCache::Find(const IndirectDataReference& ref) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = nodes_.find(Key(ref.file_id, ref.offset, ref.length));
  return it == nodes_.end() ? nullptr : it->second;
}

void NodeCache::Insert(const IndirectDataReference& ref, std::shared_ptr<const BtreeNode> node) {
  std::lock_guard<std::mutex> lock(mu_);
  InsertLocked(Key(ref.file_id, ref.offset, ref.length), ref.length, std::move(node));
}

void NodeCache::InsertLocked(const Key& key, uint64_t length,
                             std::shared_ptr<const BtreeNode> node) {
  if (length > max_bytes_) return;
  if (bytes_ + length > max_bytes_) {
    nodes_.clear();
    bytes_ = 0;
  }
  if (nodes_.emplace(key, std::move(node)).second) bytes_ += length;
}

Result<std::shared_ptr<const BtreeNode>> NodeCache::FindOrRead(
    const IndirectDataReference& ref, const std::function<Result<BtreeNode>()>& read) {
  const Key key(ref.file_id, ref.offset, ref.length);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    if (auto it = nodes_.find(key); it != nodes_.end()) return it->second;
    if (reading_.count(key) == 0) break;
    ++waiting_;
    read_done_.wait(lock);  // another caller is reading this node
    --waiting_;
  }
  reading_.insert(key);
  ++reads_;
  lock.unlock();
  Result<BtreeNode> node = read();
  std::shared_ptr<const BtreeNode> shared;
  if (node.ok()) shared = std::make_shared<const BtreeNode>(*std::move(node));
  lock.lock();
  reading_.erase(key);
  if (shared) InsertLocked(key, ref.length, shared);
  read_done_.notify_all();
  if (!shared) return node.status();
  return shared;
}

uint64_t NodeCache::reads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return reads_;
}

uint64_t NodeCache::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_;
}

ReadLimits NodeReadLimits(const Config& config, uint64_t cap) {
  ReadLimits limits;
  limits.max_node_bytes = std::min(cap, kMaxDecodedObjectBytes);
  if (config.max_decoded_node_bytes != 0) {
    const uint64_t slack =
        kEntriesAboveLimit * (kMaxKeyLength + config.max_inline_value_bytes + kEntryOverheadBytes);
    limits.max_node_bytes =
        std::min(limits.max_node_bytes, uint64_t{config.max_decoded_node_bytes} + slack);
  }
  return limits;
}

Status FindKeys(const BtreeGenerationReference& root, const std::vector<std::string>& keys,
                const ReadObjectFn& read, const FoundKeyFn& fn, const ReadLimits& limits) {
  if (keys.empty()) return Status::OK();
  if (root.root.location.IsMissing()) {
    for (size_t i = 0; i < keys.size(); ++i) CAIRN_RETURN_IF_ERROR(fn(i, nullptr));
    return Status::OK();
  }
  std::vector<Pending> pending;
  pending.reserve(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) pending.push_back({i, keys[i]});
  Walk walk{read, limits, {}};
  CAIRN_RETURN_IF_ERROR(walk.Visit(root.root.location));
  CAIRN_ASSIGN_OR_RETURN(NodePtr node,
                         ReadChild(root.root.location, root.root_height, "", read, limits));
  return FindKeysIn(*node, std::move(pending), walk, fn);
}

Result<BtreeNode> ReadBtreeNode(const IndirectDataReference& ref, uint8_t height,
                                const ReadObjectFn& read, const ReadLimits& limits) {
  std::string what = "b+tree node " + ref.ToString();
  CAIRN_RETURN_IF_ERROR(CheckNodeLength(ref, limits, what));
  CAIRN_ASSIGN_OR_RETURN(Buffer bytes, read(ref.file_id, ref.offset, ref.length));
  CAIRN_ASSIGN_OR_RETURN(BtreeNode node, DecodeBtreeNode(bytes.view(), ref.file_id.base_path,
                                                         what, limits.max_node_bytes));
  if (node.height != height) {
    return DataLossError(what + ": height " + std::to_string(node.height) + ", expected " +
                         std::to_string(height));
  }
  return node;
}

Result<std::optional<BtreeGenerationReference>> FindGeneration(const Manifest& manifest,
                                                               uint64_t generation,
                                                               const ReadObjectFn& read,
                                                               const ReadLimits& limits) {
  if (manifest.versions.empty()) return std::optional<BtreeGenerationReference>();
  if (generation == 0) return std::optional(manifest.versions.back());
  if (generation >= manifest.versions.front().generation_number) {
    return FindInLeaf(manifest.versions, generation);
  }
  const uint8_t a = manifest.config.version_tree_arity_log2;
  const VersionNodeReference* ref = nullptr;
  for (const auto& e : manifest.version_nodes) {
    uint64_t span = uint64_t{1} << (a * (e.height + 1));
    uint64_t first = e.generation_number - ((e.generation_number - 1) % span);
    if (generation >= first && generation <= e.generation_number) {
      ref = &e;
      break;
    }
  }
  if (ref == nullptr) return std::optional<BtreeGenerationReference>();
  VersionNodeReference current = *ref;
  while (true) {
    CAIRN_ASSIGN_OR_RETURN(VersionTreeNode node, ReadVersionNode(current, a, read, limits));
    if (node.height == 0) return FindInLeaf(node.leaf_entries, generation);
    const auto& cs = node.interior_entries;
    auto it = std::lower_bound(
        cs.begin(), cs.end(), generation,
        [](const VersionNodeReference& e, uint64_t g) { return e.generation_number < g; });
    if (it == cs.end()) return std::optional<BtreeGenerationReference>();
    current = *it;
  }
}

Result<std::optional<LeafValue>> FindKey(const BtreeGenerationReference& root,
                                         std::string_view key, const ReadObjectFn& read,
                                         const ReadLimits& limits) {
  if (root.root.location.IsMissing()) return std::optional<LeafValue>();
  CAIRN_ASSIGN_OR_RETURN(NodePtr node,
                         ReadChild(root.root.location, root.root_height, "", read, limits));
  std::string_view rest = key;  // key relative to the node's prefix
  while (node->height > 0) {
    const auto& es = node->interior_entries;
    auto it = std::upper_bound(
        es.begin(), es.end(), rest,
        [](std::string_view k, const InteriorEntry& e) { return k < e.key; });
    if (it == es.begin()) return std::optional<LeafValue>();
    const InteriorEntry& e = *(it - 1);
    std::string_view common = std::string_view(e.key).substr(0, e.subtree_common_prefix_length);
    if (!StartsWith(rest, common)) return std::optional<LeafValue>();
    rest.remove_prefix(common.size());
    CAIRN_ASSIGN_OR_RETURN(
        node, ReadChild(e.node.location, node->height - 1,
                        std::string_view(e.key).substr(e.subtree_common_prefix_length), read,
                        limits));
  }
  const auto& ls = node->leaf_entries;
  auto it = std::lower_bound(ls.begin(), ls.end(), rest,
                             [](const LeafEntry& e, std::string_view k) { return e.key < k; });
  if (it == ls.end() || it->key != rest) return std::optional<LeafValue>();
  return std::optional(it->value);
}

Status ListEntries(const BtreeGenerationReference& root, std::string_view prefix,
                   const ReadObjectFn& read, const LeafEntryFn& fn, const ReadLimits& limits) {
  if (root.root.location.IsMissing()) return Status::OK();
  Walk walk{read, limits, {}};
  CAIRN_RETURN_IF_ERROR(walk.Visit(root.root.location));
  CAIRN_ASSIGN_OR_RETURN(NodePtr node,
                         ReadChild(root.root.location, root.root_height, "", read, limits));
  return ListRecursive(*node, "", prefix, walk, fn);
}

Result<Buffer> ReadValueRange(const LeafValue& value, uint64_t begin, uint64_t end,
                              const ReadObjectFn& read) {
  if (value.is_inline) {
    return Buffer::CopyOf(std::string_view(value.inline_value).substr(begin, end - begin));
  }
  if (end == begin) return Buffer();
  return read(value.ref.file_id, value.ref.offset + begin, end - begin);
}

}  // namespace cairn::ocdbt
