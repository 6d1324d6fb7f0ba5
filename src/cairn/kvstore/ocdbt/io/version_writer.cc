#include "cairn/kvstore/ocdbt/io/version_writer.h"

#include <algorithm>

namespace cairn::ocdbt {
namespace {

Result<VersionNodeReference> WriteNode(const VersionTreeNode& node, const Config& config,
                                       DataFileWriter* out) {
  CAIRN_ASSIGN_OR_RETURN(Buffer encoded, EncodeVersionTreeNode(node, config.compression));
  VersionNodeReference ref;
  CAIRN_ASSIGN_OR_RETURN(ref.location, out->Append(encoded.view()));
  ref.height = node.height;
  if (node.height == 0) {
    ref.generation_number = node.leaf_entries.back().generation_number;
    ref.num_generations = node.leaf_entries.size();
    ref.commit_time = node.leaf_entries.front().commit_time;
  } else {
    ref.generation_number = node.interior_entries.back().generation_number;
    for (const auto& c : node.interior_entries) ref.num_generations += c.num_generations;
    ref.commit_time = node.interior_entries.front().commit_time;
  }
  return ref;
}

bool InRange(const VersionNodeReference& ref, const VersionNodeRange& r) {
  return ref.generation_number >= r.min_generation && ref.generation_number <= r.max_generation;
}

}  // namespace

Result<Manifest> CreateNewManifest(const std::optional<Manifest>& old, const Config& config,
                                   const BtreeGenerationReference& version,
                                   const ReadObjectFn& read, DataFileWriter* out) {
  Manifest m;
  m.config = config;
  if (!old || old->versions.empty()) {
    m.versions = {version};
    return m;
  }
  const uint8_t a = config.version_tree_arity_log2;
  const uint64_t latest = old->latest_generation();
  const uint64_t n = version.generation_number;
  if (((latest - 1) >> a) == ((n - 1) >> a)) {
    m.versions = old->versions;
    m.versions.push_back(version);
    m.version_nodes = old->version_nodes;
    return m;
  }
  // The old inline versions become a height-0 node; carry it upward.
  VersionTreeNode leaf;
  leaf.height = 0;
  leaf.arity_log2 = a;
  leaf.leaf_entries = old->versions;
  CAIRN_ASSIGN_OR_RETURN(VersionNodeReference leaf_ref, WriteNode(leaf, config, out));
  std::optional<VersionNodeReference> prev_child = leaf_ref;
  std::vector<VersionNodeReference> nodes;  // increasing height
  for (const auto& range : ManifestVersionNodeRanges(n, a)) {
    std::optional<VersionNodeReference> old_node;
    for (const auto& v : old->version_nodes) {
      if (v.height == range.height) old_node = v;
    }
    bool old_in = old_node && InRange(*old_node, range);
    bool prev_in = prev_child && InRange(*prev_child, range);
    if (prev_in) {
      VersionTreeNode node;
      node.height = range.height;
      node.arity_log2 = a;
      if (old_in) {
        const uint64_t limit = NodeReadLimits(config, kMaxDecodedObjectBytes).max_node_bytes;
        if (old_node->location.length > limit + limit / 64 + 1024) {
          return DataLossError("version tree node " + old_node->location.ToString() +
                               ": over the node size limit of " + std::to_string(limit));
        }
        CAIRN_ASSIGN_OR_RETURN(Buffer bytes, read(old_node->location.file_id,
                                                  old_node->location.offset,
                                                  old_node->location.length));
        CAIRN_ASSIGN_OR_RETURN(
            VersionTreeNode old_decoded,
            DecodeVersionTreeNode(bytes.view(), a, old_node->location.file_id.base_path,
                                  "version tree node " + old_node->location.ToString(),
                                  limit));
        if (old_decoded.height != range.height) {
          return DataLossError("version tree node " + old_node->location.ToString() +
                               ": unexpected height " + std::to_string(old_decoded.height));
        }
        node.interior_entries = std::move(old_decoded.interior_entries);
      }
      node.interior_entries.push_back(*prev_child);
      CAIRN_ASSIGN_OR_RETURN(VersionNodeReference ref, WriteNode(node, config, out));
      nodes.push_back(ref);
    } else if (old_in) {
      nodes.push_back(*old_node);
    }
    prev_child = old_node;
  }
  std::reverse(nodes.begin(), nodes.end());
  m.versions = {version};
  m.version_nodes = std::move(nodes);
  return m;
}

}  // namespace cairn::ocdbt
