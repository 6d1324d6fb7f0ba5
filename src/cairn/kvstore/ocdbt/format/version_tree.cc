#include "cairn/kvstore/ocdbt/format/version_tree.h"

#include "cairn/util/coding.h"

namespace cairn::ocdbt {

std::vector<VersionNodeRange> ManifestVersionNodeRanges(uint64_t latest, uint8_t arity_log2) {
  std::vector<VersionNodeRange> ranges;
  if (latest == 0) return ranges;
  const unsigned a = arity_log2;
  uint64_t g = ((latest - 1) >> a) << a;
  unsigned h = 1;
  while (g != 0) {
    unsigned shift = (h + 1) * a;
    uint64_t next = shift >= 64 ? 0 : ((g - 1) >> shift) << shift;
    ranges.push_back({static_cast<uint8_t>(h), next + 1, g});
    ++h;
    g = next;
  }
  return ranges;
}

void AddIds(const std::vector<BtreeGenerationReference>& entries, DataFileTableBuilder* table) {
  for (const auto& e : entries) table->Add(e.root.location.file_id);
}

void AddIds(const std::vector<VersionNodeReference>& entries, DataFileTableBuilder* table) {
  for (const auto& e : entries) table->Add(e.location.file_id);
}

void EncodeLeafEntries(const std::vector<BtreeGenerationReference>& es,
                       const DataFileTableBuilder& table, Buffer* out) {
  AppendVarint64(out, es.size());
  for (const auto& e : es) AppendVarint64(out, e.generation_number);
  for (const auto& e : es) out->append(ByteView(&e.root_height, 1));
  for (const auto& e : es) AppendVarint64(out, table.Index(e.root.location.file_id));
  for (const auto& e : es) AppendVarint64(out, e.root.location.offset);
  for (const auto& e : es) AppendVarint64(out, e.root.location.length);
  for (const auto& e : es) AppendVarint64(out, e.root.statistics.num_keys);
  for (const auto& e : es) AppendVarint64(out, e.root.statistics.num_tree_bytes);
  for (const auto& e : es) AppendVarint64(out, e.root.statistics.num_indirect_value_bytes);
  for (const auto& e : es) AppendLE64(out, e.commit_time);
}

void EncodeInteriorEntries(const std::vector<VersionNodeReference>& es,
                           const DataFileTableBuilder& table, bool with_heights, Buffer* out) {
  AppendVarint64(out, es.size());
  for (const auto& e : es) AppendVarint64(out, e.generation_number);
  for (const auto& e : es) AppendVarint64(out, table.Index(e.location.file_id));
  for (const auto& e : es) AppendVarint64(out, e.location.offset);
  for (const auto& e : es) AppendVarint64(out, e.location.length);
  for (const auto& e : es) AppendVarint64(out, e.num_generations);
  for (const auto& e : es) AppendLE64(out, e.commit_time);
  if (with_heights) {
    for (const auto& e : es) out->append(ByteView(&e.height, 1));
  }
}

Status DecodeLeafEntries(FieldReader& r, const std::vector<DataFileId>& table,
                         uint8_t arity_log2, std::vector<BtreeGenerationReference>* out) {
  uint64_t n;
  CAIRN_RETURN_IF_ERROR(r.Varint64(&n, "num_versions"));
  const uint64_t max_entries = uint64_t{1} << arity_log2;
  if (n == 0 || n > max_entries) {
    return r.Error("num_versions " + std::to_string(n) + " is outside 1.." +
                   std::to_string(max_entries));
  }
  CAIRN_RETURN_IF_ERROR(r.CheckCount(n, 16, "num_versions"));
  auto& es = *out;
  es.assign(n, {});
  for (auto& e : es) CAIRN_RETURN_IF_ERROR(r.Varint64(&e.generation_number, "generation_number"));
  for (auto& e : es) CAIRN_RETURN_IF_ERROR(r.Byte(&e.root_height, "root_height"));
  for (auto& e : es) {
    CAIRN_RETURN_IF_ERROR(ReadDataFileIndex(r, table, &e.root.location.file_id, "data_file_id"));
  }
  for (auto& e : es) CAIRN_RETURN_IF_ERROR(r.Varint64(&e.root.location.offset, "offset"));
  for (auto& e : es) CAIRN_RETURN_IF_ERROR(r.Varint64(&e.root.location.length, "length"));
  for (auto& e : es) CAIRN_RETURN_IF_ERROR(r.Varint64(&e.root.statistics.num_keys, "num_keys"));
  for (auto& e : es) {
    CAIRN_RETURN_IF_ERROR(r.Varint64(&e.root.statistics.num_tree_bytes, "num_tree_bytes"));
  }
  for (auto& e : es) {
    CAIRN_RETURN_IF_ERROR(r.Varint64(&e.root.statistics.num_indirect_value_bytes,
                                     "num_indirect_value_bytes"));
  }
  for (auto& e : es) CAIRN_RETURN_IF_ERROR(r.LE64(&e.commit_time, "commit_time"));
  for (uint64_t i = 0; i < n; ++i) {
    const auto& e = es[i];
    std::string at = "version entry " + std::to_string(i) + ": ";
    if (e.generation_number == 0) return r.Error(at + "generation number 0");
    if (i > 0 && e.generation_number <= es[i - 1].generation_number) {
      return r.Error(at + "generation numbers not strictly increasing");
    }
    CAIRN_RETURN_IF_ERROR(ValidateIndirectDataReference(e.root.location, true, r));
    if (e.root.location.IsMissing() &&
        (e.root_height != 0 || !(e.root.statistics == BtreeNodeStatistics{}))) {
      return r.Error(at + "empty generation with non-zero height or statistics");
    }
  }
  uint64_t last = es.back().generation_number;
  if (es.front().generation_number < last - ((last - 1) % max_entries)) {
    return r.Error("version leaf entries span more than one block of " +
                   std::to_string(max_entries) + " generations");
  }
  return Status::OK();
}

Status DecodeInteriorEntries(FieldReader& r, const std::vector<DataFileId>& table,
                             uint8_t arity_log2, uint8_t node_height,
                             std::vector<VersionNodeReference>* out) {
  const bool manifest = node_height == 0;
  uint64_t n;
  CAIRN_RETURN_IF_ERROR(r.Varint64(&n, "num_children"));
  const uint64_t max_entries =
      manifest ? MaxVersionTreeHeight(arity_log2) : (uint64_t{1} << arity_log2);
  if ((!manifest && n == 0) || n > max_entries) {
    return r.Error("version node count " + std::to_string(n) + " is outside " +
                   (manifest ? "0.." : "1..") + std::to_string(max_entries));
  }
  CAIRN_RETURN_IF_ERROR(r.CheckCount(n, 12, "num_children"));
  auto& es = *out;
  es.assign(n, {});
  for (auto& e : es) CAIRN_RETURN_IF_ERROR(r.Varint64(&e.generation_number, "generation_number"));
  for (auto& e : es) {
    CAIRN_RETURN_IF_ERROR(ReadDataFileIndex(r, table, &e.location.file_id, "data_file_id"));
  }
  for (auto& e : es) CAIRN_RETURN_IF_ERROR(r.Varint64(&e.location.offset, "offset"));
  for (auto& e : es) CAIRN_RETURN_IF_ERROR(r.Varint64(&e.location.length, "length"));
  for (auto& e : es) CAIRN_RETURN_IF_ERROR(r.Varint64(&e.num_generations, "num_generations"));
  for (auto& e : es) CAIRN_RETURN_IF_ERROR(r.LE64(&e.commit_time, "commit_time"));
  const unsigned a = arity_log2;
  for (uint64_t i = 0; i < n; ++i) {
    auto& e = es[i];
    if (manifest) {
      CAIRN_RETURN_IF_ERROR(r.Byte(&e.height, "entry_height"));
    } else {
      e.height = node_height - 1;
    }
  }
  for (uint64_t i = 0; i < n; ++i) {
    auto& e = es[i];
    std::string at = "version node entry " + std::to_string(i) + ": ";
    if (manifest && (e.height == 0 || e.height > MaxVersionTreeHeight(arity_log2))) {
      return r.Error(at + "height " + std::to_string(e.height) + " is outside 1.." +
                     std::to_string(MaxVersionTreeHeight(arity_log2)));
    }
    if (manifest && i > 0 && e.height >= es[i - 1].height) {
      return r.Error(at + "heights not strictly decreasing");
    }
    if (e.generation_number == 0) return r.Error(at + "generation number 0");
    if (i > 0 && e.generation_number <= es[i - 1].generation_number) {
      return r.Error(at + "generation numbers not strictly increasing");
    }
    CAIRN_RETURN_IF_ERROR(ValidateIndirectDataReference(e.location, false, r));
    // The referenced node covers at most 2^(a*(height+1)) generations.
    const uint64_t span = uint64_t{1} << (a * (e.height + 1));
    if (e.num_generations == 0 || e.num_generations > span) {
      return r.Error(at + "num_generations " + std::to_string(e.num_generations) +
                     " is outside 1.." + std::to_string(span));
    }
    if (!manifest) {
      // Children of an interior node are full: aligned to their span, and all
      // inside the span of this node.
      if (e.generation_number % span != 0) {
        return r.Error(at + "generation " + std::to_string(e.generation_number) +
                       " is not a multiple of " + std::to_string(span));
      }
      const unsigned node_shift = a * (node_height + 1);
      if (((e.generation_number - 1) >> node_shift) !=
          ((es[0].generation_number - 1) >> node_shift)) {
        return r.Error(at + "children span more than one block");
      }
    }
  }
  return Status::OK();
}

Result<Buffer> EncodeVersionTreeNode(const VersionTreeNode& node,
                                     const CompressionOptions& compression) {
  size_t n = node.height == 0 ? node.leaf_entries.size() : node.interior_entries.size();
  if (n == 0 || n > (size_t{1} << node.arity_log2)) {
    return InvalidArgumentError("version tree node must have 1..2^arity entries");
  }
  Buffer body;
  body.append(ByteView(&node.arity_log2, 1));
  body.append(ByteView(&node.height, 1));
  DataFileTableBuilder table;
  if (node.height == 0) {
    AddIds(node.leaf_entries, &table);
    table.Encode("", &body);
    EncodeLeafEntries(node.leaf_entries, table, &body);
  } else {
    AddIds(node.interior_entries, &table);
    table.Encode("", &body);
    EncodeInteriorEntries(node.interior_entries, table, false, &body);
  }
  return EncodeEnvelope(kVersionTreeNodeMagic, body.view(), compression);
}

Result<VersionTreeNode> DecodeVersionTreeNode(ByteView encoded, uint8_t arity_log2,
                                              std::string_view transitive_path,
                                              std::string_view what, uint64_t max_body_bytes) {
  CAIRN_ASSIGN_OR_RETURN(Buffer body, DecodeEnvelope(kVersionTreeNodeMagic, encoded, what,
                                                     max_body_bytes));
  FieldReader r(body.view(), what);
  VersionTreeNode node;
  CAIRN_RETURN_IF_ERROR(r.Byte(&node.arity_log2, "version_tree_arity_log2"));
  if (node.arity_log2 != arity_log2) {
    return r.Error("version_tree_arity_log2 " + std::to_string(node.arity_log2) +
                   " differs from the config's " + std::to_string(arity_log2));
  }
  CAIRN_RETURN_IF_ERROR(r.Byte(&node.height, "height"));
  if (node.height > MaxVersionTreeHeight(arity_log2)) {
    return r.Error("height " + std::to_string(node.height) + " exceeds maximum " +
                   std::to_string(MaxVersionTreeHeight(arity_log2)));
  }
  CAIRN_ASSIGN_OR_RETURN(auto table, DecodeDataFileTable(r, transitive_path));
  if (node.height == 0) {
    CAIRN_RETURN_IF_ERROR(DecodeLeafEntries(r, table, arity_log2, &node.leaf_entries));
  } else {
    CAIRN_RETURN_IF_ERROR(
        DecodeInteriorEntries(r, table, arity_log2, node.height, &node.interior_entries));
  }
  CAIRN_RETURN_IF_ERROR(r.ExpectEnd());
  return node;
}

}  // namespace cairn::ocdbt
