#include "cairn/kvstore/ocdbt/io/btree_writer.h"

#include <algorithm>
#include <span>

namespace cairn::ocdbt {
namespace {

size_t CommonPrefix(std::string_view a, std::string_view b) {
  size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

// Entries of one level with full keys.
struct FullLeaf {
  std::string key;
  LeafValue value;
};
struct FullChild {
  std::string key;         // inclusive lower bound (the child's first key)
  size_t prefix_len = 0;   // length of the child's implicit prefix (a prefix of key)
  BtreeNodeReference node;
};

struct Context {
  const Config& config;
  const ReadObjectFn& read;
  DataFileWriter* out;
};

uint64_t EstimateSize(const FullLeaf& e) {
  return 16 + e.key.size() +
         (e.value.is_inline ? e.value.inline_value.size()
                            : 16 + e.value.ref.file_id.FullPath().size());
}
uint64_t EstimateSize(const FullChild& e) {
  return 16 + 16 + 24 + e.key.size() + e.node.location.file_id.FullPath().size();
}

// Splits `n` entries into consecutive groups of estimated size at most
// max_decoded_node_bytes (0 = unlimited), at most 2^20 entries, and at
// least `min_entries` entries (except when fewer remain).
template <typename Entry>
std::vector<std::span<const Entry>> Split(const std::vector<Entry>& entries, uint64_t max_bytes,
                                          size_t min_entries) {
  std::vector<std::span<const Entry>> groups;
  size_t start = 0;
  uint64_t size = 0;
  for (size_t i = 0; i < entries.size(); ++i) {
    uint64_t s = EstimateSize(entries[i]);
    size_t count = i - start;
    bool full = count >= kMaxNodeEntries || (max_bytes != 0 && size + s > max_bytes);
    if (count >= min_entries && full) {
      groups.emplace_back(entries.data() + start, count);
      start = i;
      size = 0;
    }
    size += s;
  }
  if (start < entries.size()) {
    // Merge a too-small tail into the previous group.
    if (entries.size() - start < min_entries && !groups.empty() &&
        groups.back().size() + (entries.size() - start) <= kMaxNodeEntries) {
      auto prev = groups.back();
      groups.back() = std::span<const Entry>(prev.data(), prev.size() + entries.size() - start);
    } else {
      groups.emplace_back(entries.data() + start, entries.size() - start);
    }
  }
  return groups;
}

// Encodes the nodes of one level at `height`; each becomes a FullChild of
// the level above. With `may_be_root` and a single node, the node gets the
// empty implicit prefix a root needs.
Result<std::vector<FullChild>> EncodeLeafLevel(const std::vector<FullLeaf>& entries,
                                               bool may_be_root, Context& ctx) {
  std::vector<FullChild> result;
  auto groups = Split(entries, ctx.config.max_decoded_node_bytes, 1);
  for (const auto& g : groups) {
    size_t plen = (may_be_root && groups.size() == 1)
                      ? 0
                      : CommonPrefix(g.front().key, g.back().key);
    BtreeNode node;
    node.height = 0;
    BtreeNodeStatistics stats;
    for (const auto& e : g) {
      node.leaf_entries.push_back({e.key.substr(plen), e.value});
      if (!e.value.is_inline) stats.num_indirect_value_bytes += e.value.ref.length;
    }
    stats.num_keys = g.size();
    CAIRN_ASSIGN_OR_RETURN(Buffer encoded, EncodeBtreeNode(node, ctx.config.compression));
    stats.num_tree_bytes = encoded.size();
    CAIRN_ASSIGN_OR_RETURN(IndirectDataReference where, ctx.out->Append(encoded.view()));
    result.push_back({g.front().key, plen, {std::move(where), stats}});
  }
  return result;
}

Result<std::vector<FullChild>> EncodeInteriorLevel(const std::vector<FullChild>& entries,
                                                   uint8_t height, bool may_be_root,
                                                   Context& ctx) {
  std::vector<FullChild> result;
  auto groups = Split(entries, ctx.config.max_decoded_node_bytes, 2);
  for (const auto& g : groups) {
    size_t plen = 0;
    if (!(may_be_root && groups.size() == 1)) {
      plen = CommonPrefix(g.front().key, g.back().key);
      for (const auto& e : g) plen = std::min(plen, e.prefix_len);
    }
    BtreeNode node;
    node.height = height;
    BtreeNodeStatistics stats;
    for (const auto& e : g) {
      node.interior_entries.push_back(
          {e.key.substr(plen), static_cast<uint32_t>(e.prefix_len - plen), e.node});
      stats += e.node.statistics;
    }
    CAIRN_ASSIGN_OR_RETURN(Buffer encoded, EncodeBtreeNode(node, ctx.config.compression));
    stats.num_tree_bytes += encoded.size();
    CAIRN_ASSIGN_OR_RETURN(IndirectDataReference where, ctx.out->Append(encoded.view()));
    result.push_back({g.front().key, plen, {std::move(where), stats}});
  }
  return result;
}

// Applies `muts` to the subtree at `ref` whose implicit prefix is `prefix`;
// returns the replacement entries (zero or more nodes of the same height).
Result<std::vector<FullChild>> UpdateSubtree(const IndirectDataReference& ref, uint8_t height,
                                             const std::string& prefix,
                                             std::span<const BtreeMutation> muts, bool is_root,
                                             Context& ctx) {
  CAIRN_ASSIGN_OR_RETURN(
      BtreeNode node,
      ReadBtreeNode(ref, height, ctx.read, NodeReadLimits(ctx.config, kMaxDecodedObjectBytes)));
  if (height == 0) {
    std::vector<FullLeaf> merged;
    merged.reserve(node.leaf_entries.size() + muts.size());
    size_t m = 0;
    for (auto& e : node.leaf_entries) {
      std::string key = prefix + e.key;
      while (m < muts.size() && muts[m].key < key) {
        if (muts[m].value) merged.push_back({muts[m].key, *muts[m].value});
        ++m;
      }
      if (m < muts.size() && muts[m].key == key) {
        if (muts[m].value) merged.push_back({muts[m].key, *muts[m].value});
        ++m;
      } else {
        merged.push_back({std::move(key), std::move(e.value)});
      }
    }
    for (; m < muts.size(); ++m) {
      if (muts[m].value) merged.push_back({muts[m].key, *muts[m].value});
    }
    return EncodeLeafLevel(merged, is_root, ctx);
  }
  std::vector<FullChild> children;
  const auto& es = node.interior_entries;
  size_t m = 0;
  for (size_t i = 0; i < es.size(); ++i) {
    std::string key = prefix + es[i].key;
    size_t child_prefix_len = prefix.size() + es[i].subtree_common_prefix_length;
    // Child i receives the keys below child i+1's bound (child 0 also those
    // below its own bound).
    size_t end = m;
    if (i + 1 < es.size()) {
      std::string next = prefix + es[i + 1].key;
      while (end < muts.size() && muts[end].key < next) ++end;
    } else {
      end = muts.size();
    }
    if (end == m) {
      children.push_back({std::move(key), child_prefix_len, es[i].node});
      continue;
    }
    CAIRN_ASSIGN_OR_RETURN(auto replaced,
                           UpdateSubtree(es[i].node.location, height - 1,
                                         key.substr(0, child_prefix_len),
                                         muts.subspan(m, end - m), false, ctx));
    for (auto& c : replaced) children.push_back(std::move(c));
    m = end;
  }
  if (children.empty()) return children;
  return EncodeInteriorLevel(children, height, is_root, ctx);
}

}  // namespace

Result<NewRoot> UpdateBtree(const std::optional<BtreeGenerationReference>& old_root,
                            const std::vector<BtreeMutation>& mutations, const Config& config,
                            const ReadObjectFn& read, DataFileWriter* out) {
  Context ctx{config, read, out};
  std::vector<FullChild> level;
  uint8_t height = 0;
  if (!old_root || old_root->root.location.IsMissing()) {
    std::vector<FullLeaf> leaves;
    for (const auto& m : mutations) {
      if (m.value) leaves.push_back({m.key, *m.value});
    }
    CAIRN_ASSIGN_OR_RETURN(level, EncodeLeafLevel(leaves, true, ctx));
  } else {
    height = old_root->root_height;
    CAIRN_ASSIGN_OR_RETURN(level, UpdateSubtree(old_root->root.location, height, "",
                                                mutations, true, ctx));
  }
  while (level.size() > 1) {
    if (height == 255) return InternalError("b+tree height exceeds 255");
    ++height;
    CAIRN_ASSIGN_OR_RETURN(level, EncodeInteriorLevel(level, height, true, ctx));
  }
  NewRoot root;
  if (level.empty()) {
    root.root.location = IndirectDataReference::Missing();
    root.height = 0;
  } else {
    root.root = level[0].node;
    root.height = height;
  }
  return root;
}

}  // namespace cairn::ocdbt
