#include "cairn/kvstore/ocdbt/format/btree.h"

#include <algorithm>

#include "cairn/kvstore/ocdbt/format/config.h"
#include "cairn/util/coding.h"

namespace cairn::ocdbt {
namespace {

// Decoded keys may not add up to more than this (bounds the allocation a
// small, prefix-compressed node can cause).
constexpr uint64_t kMaxTotalKeyBytes = uint64_t{1} << 30;

size_t CommonPrefix(std::string_view a, std::string_view b) {
  size_t n = std::min(a.size(), b.size());
  size_t i = 0;
  while (i < n && a[i] == b[i]) ++i;
  return i;
}

template <typename Entry>
Status EncodeKeys(const std::vector<Entry>& entries, bool interior, Buffer* out) {
  for (size_t i = 0; i < entries.size(); ++i) {
    if (entries[i].key.size() > kMaxKeyLength) {
      return InvalidArgumentError("b+tree key longer than 65535 bytes");
    }
    if (i > 0 && !(entries[i - 1].key < entries[i].key)) {
      return InvalidArgumentError("b+tree node keys are not strictly increasing at entry " +
                                  std::to_string(i));
    }
  }
  for (size_t i = 1; i < entries.size(); ++i) {
    AppendVarint64(out, CommonPrefix(entries[i - 1].key, entries[i].key));
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    size_t p = i == 0 ? 0 : CommonPrefix(entries[i - 1].key, entries[i].key);
    AppendVarint64(out, entries[i].key.size() - p);
  }
  if (interior) {
    for (const auto& e : entries) {
      if constexpr (requires { e.subtree_common_prefix_length; }) {
        if (e.subtree_common_prefix_length > e.key.size()) {
          return InvalidArgumentError("subtree_common_prefix_length exceeds key length");
        }
        AppendVarint64(out, e.subtree_common_prefix_length);
      }
    }
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    size_t p = i == 0 ? 0 : CommonPrefix(entries[i - 1].key, entries[i].key);
    out->append(std::string_view(entries[i].key).substr(p));
  }
  return Status::OK();
}

// Reads the key columns of `n` entries into `keys` (and the subtree prefix
// lengths for interior nodes).
Status DecodeKeys(FieldReader& r, uint32_t n, bool interior, std::vector<std::string>* keys,
                  std::vector<uint32_t>* scpl) {
  std::vector<uint32_t> prefix(n, 0), suffix(n);
  for (uint32_t i = 1; i < n; ++i) {
    CAIRN_RETURN_IF_ERROR(r.Varint16(&prefix[i], "key_prefix_length"));
  }
  uint64_t total = 0;
  for (uint32_t i = 0; i < n; ++i) {
    CAIRN_RETURN_IF_ERROR(r.Varint16(&suffix[i], "key_suffix_length"));
    uint64_t len = uint64_t{prefix[i]} + suffix[i];
    if (len > kMaxKeyLength) {
      return r.Error("key " + std::to_string(i) + " length " + std::to_string(len) +
                     " exceeds 65535");
    }
    total += len;
    if (total > kMaxTotalKeyBytes) return r.Error("decoded keys exceed 1 GiB");
  }
  if (interior) {
    scpl->resize(n);
    for (uint32_t i = 0; i < n; ++i) {
      CAIRN_RETURN_IF_ERROR(r.Varint16(&(*scpl)[i], "subtree_common_prefix_length"));
    }
  }
  keys->resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    ByteView s;
    CAIRN_RETURN_IF_ERROR(r.Bytes(suffix[i], &s, "key_suffix"));
    std::string_view sv = AsStringView(s);
    if (i > 0) {
      const std::string& prev = (*keys)[i - 1];
      if (prefix[i] > prev.size()) {
        return r.Error("key " + std::to_string(i) + ": key_prefix_length " +
                       std::to_string(prefix[i]) + " exceeds previous key length " +
                       std::to_string(prev.size()));
      }
      if (!(std::string_view(prev).substr(prefix[i]) < sv)) {
        return r.Error("invalid key order at entry " + std::to_string(i));
      }
      (*keys)[i].assign(prev, 0, prefix[i]);
    }
    (*keys)[i].append(sv);
    if (interior && (*scpl)[i] > (*keys)[i].size()) {
      return r.Error("entry " + std::to_string(i) + ": subtree_common_prefix_length " +
                     std::to_string((*scpl)[i]) + " exceeds key length " +
                     std::to_string((*keys)[i].size()));
    }
  }
  return Status::OK();
}

}  // namespace

Result<Buffer> EncodeBtreeNode(const BtreeNode& node, const CompressionOptions& compression) {
  const bool interior = node.height > 0;
  size_t n = interior ? node.interior_entries.size() : node.leaf_entries.size();
  if (n == 0 || n > kMaxNodeEntries) {
    return InvalidArgumentError("b+tree node must have 1..2^20 entries, has " +
                                std::to_string(n));
  }
  DataFileTableBuilder table;
  if (interior) {
    for (const auto& e : node.interior_entries) table.Add(e.node.location.file_id);
  } else {
    for (const auto& e : node.leaf_entries) {
      if (!e.value.is_inline) table.Add(e.value.ref.file_id);
    }
  }
  Buffer body;
  body.append(ByteView(&node.height, 1));
  table.Encode("", &body);
  AppendVarint64(&body, n);
  if (interior) {
    const auto& es = node.interior_entries;
    CAIRN_RETURN_IF_ERROR(EncodeKeys(es, true, &body));
    for (const auto& e : es) AppendVarint64(&body, table.Index(e.node.location.file_id));
    for (const auto& e : es) AppendVarint64(&body, e.node.location.offset);
    for (const auto& e : es) AppendVarint64(&body, e.node.location.length);
    for (const auto& e : es) AppendVarint64(&body, e.node.statistics.num_keys);
    for (const auto& e : es) AppendVarint64(&body, e.node.statistics.num_tree_bytes);
    for (const auto& e : es) AppendVarint64(&body, e.node.statistics.num_indirect_value_bytes);
  } else {
    const auto& es = node.leaf_entries;
    CAIRN_RETURN_IF_ERROR(EncodeKeys(es, false, &body));
    for (const auto& e : es) AppendVarint64(&body, e.value.size());
    for (const auto& e : es) {
      uint8_t kind = e.value.is_inline ? 0 : 1;
      body.append(ByteView(&kind, 1));
    }
    for (const auto& e : es) {
      if (!e.value.is_inline) AppendVarint64(&body, table.Index(e.value.ref.file_id));
    }
    for (const auto& e : es) {
      if (!e.value.is_inline) AppendVarint64(&body, e.value.ref.offset);
    }
    for (const auto& e : es) {
      if (!e.value.is_inline) continue;
      if (e.value.inline_value.size() > kMaxInlineValueBytes) {
        return InvalidArgumentError("inline value larger than 1 MiB");
      }
      body.append(e.value.inline_value);
    }
  }
  return EncodeEnvelope(kBtreeNodeMagic, body.view(), compression);
}

Result<BtreeNode> DecodeBtreeNode(ByteView encoded, std::string_view transitive_path,
                                  std::string_view what, uint64_t max_body_bytes) {
  CAIRN_ASSIGN_OR_RETURN(Buffer body,
                         DecodeEnvelope(kBtreeNodeMagic, encoded, what, max_body_bytes));
  FieldReader r(body.view(), what);
  BtreeNode node;
  CAIRN_RETURN_IF_ERROR(r.Byte(&node.height, "height"));
  CAIRN_ASSIGN_OR_RETURN(auto table, DecodeDataFileTable(r, transitive_path));
  uint32_t n;
  CAIRN_RETURN_IF_ERROR(r.Varint32(&n, "num_entries"));
  if (n == 0 || n > kMaxNodeEntries) {
    return r.Error("num_entries " + std::to_string(n) + " is outside 1..2^20");
  }
  const bool interior = node.height > 0;
  CAIRN_RETURN_IF_ERROR(r.CheckCount(n, interior ? 8 : 3, "num_entries"));
  std::vector<std::string> keys;
  std::vector<uint32_t> scpl;
  CAIRN_RETURN_IF_ERROR(DecodeKeys(r, n, interior, &keys, &scpl));
  if (interior) {
    auto& es = node.interior_entries;
    es.resize(n);
    for (uint32_t i = 0; i < n; ++i) {
      es[i].key = std::move(keys[i]);
      es[i].subtree_common_prefix_length = scpl[i];
    }
    for (auto& e : es) {
      CAIRN_RETURN_IF_ERROR(ReadDataFileIndex(r, table, &e.node.location.file_id, "data_file_id"));
    }
    for (auto& e : es) CAIRN_RETURN_IF_ERROR(r.Varint64(&e.node.location.offset, "offset"));
    for (auto& e : es) CAIRN_RETURN_IF_ERROR(r.Varint64(&e.node.location.length, "length"));
    for (auto& e : es) {
      CAIRN_RETURN_IF_ERROR(r.Varint64(&e.node.statistics.num_keys, "num_keys"));
    }
    for (auto& e : es) {
      CAIRN_RETURN_IF_ERROR(r.Varint64(&e.node.statistics.num_tree_bytes, "num_tree_bytes"));
    }
    for (auto& e : es) {
      CAIRN_RETURN_IF_ERROR(r.Varint64(&e.node.statistics.num_indirect_value_bytes,
                                       "num_indirect_value_bytes"));
    }
    for (auto& e : es) {
      CAIRN_RETURN_IF_ERROR(ValidateIndirectDataReference(e.node.location, false, r));
    }
  } else {
    auto& es = node.leaf_entries;
    es.resize(n);
    std::vector<uint64_t> lengths(n);
    for (uint32_t i = 0; i < n; ++i) {
      es[i].key = std::move(keys[i]);
      CAIRN_RETURN_IF_ERROR(r.Varint64(&lengths[i], "value_length"));
    }
    for (uint32_t i = 0; i < n; ++i) {
      uint8_t kind;
      CAIRN_RETURN_IF_ERROR(r.Byte(&kind, "value_kind"));
      if (kind > 1) {
        return r.Error("entry " + std::to_string(i) + ": invalid value_kind " +
                       std::to_string(kind));
      }
      es[i].value.is_inline = kind == 0;
      es[i].value.ref.length = lengths[i];
    }
    for (auto& e : es) {
      if (e.value.is_inline) continue;
      CAIRN_RETURN_IF_ERROR(ReadDataFileIndex(r, table, &e.value.ref.file_id, "data_file_id"));
    }
    for (auto& e : es) {
      if (e.value.is_inline) continue;
      CAIRN_RETURN_IF_ERROR(r.Varint64(&e.value.ref.offset, "data_file_offset"));
      CAIRN_RETURN_IF_ERROR(ValidateIndirectDataReference(e.value.ref, false, r));
    }
    for (uint32_t i = 0; i < n; ++i) {
      auto& v = es[i].value;
      if (!v.is_inline) continue;
      if (lengths[i] > kMaxInlineValueBytes) {
        return r.Error("entry " + std::to_string(i) + ": inline value of " +
                       std::to_string(lengths[i]) + " bytes exceeds 1 MiB");
      }
      ByteView bytes;
      CAIRN_RETURN_IF_ERROR(r.Bytes(lengths[i], &bytes, "inline value"));
      v.inline_value.assign(AsStringView(bytes));
      v.ref = IndirectDataReference{};
    }
  }
  CAIRN_RETURN_IF_ERROR(r.ExpectEnd());
  return node;
}

}  // namespace cairn::ocdbt
