#include "cairn/kvstore/ocdbt/format/config.h"

#include "cairn/util/coding.h"

namespace cairn::ocdbt {

void EncodeConfig(const Config& config, Buffer* out) {
  out->append(ByteView(config.uuid.data(), config.uuid.size()));
  uint8_t kind = static_cast<uint8_t>(config.manifest_kind);
  out->append(ByteView(&kind, 1));
  AppendVarint64(out, config.max_inline_value_bytes);
  AppendVarint64(out, config.max_decoded_node_bytes);
  out->append(ByteView(&config.version_tree_arity_log2, 1));
  AppendVarint64(out, static_cast<uint8_t>(config.compression.method));
  if (config.compression.method == CompressionMethod::kZstd) {
    AppendLE32(out, static_cast<uint32_t>(config.compression.zstd_level));
  }
}

Status DecodeConfig(FieldReader& r, Config* config) {
  ByteView uuid;
  CAIRN_RETURN_IF_ERROR(r.Bytes(16, &uuid, "config uuid"));
  std::copy(uuid.begin(), uuid.end(), config->uuid.begin());
  uint8_t kind;
  CAIRN_RETURN_IF_ERROR(r.Byte(&kind, "config manifest_kind"));
  if (kind > 1) return r.Error("invalid manifest_kind " + std::to_string(kind));
  config->manifest_kind = static_cast<ManifestKind>(kind);
  CAIRN_RETURN_IF_ERROR(r.Varint32(&config->max_inline_value_bytes,
                                   "config max_inline_value_bytes"));
  CAIRN_RETURN_IF_ERROR(r.Varint32(&config->max_decoded_node_bytes,
                                   "config max_decoded_node_bytes"));
  CAIRN_RETURN_IF_ERROR(r.Byte(&config->version_tree_arity_log2,
                               "config version_tree_arity_log2"));
  if (config->version_tree_arity_log2 < 1 || config->version_tree_arity_log2 > 16) {
    return r.Error("version_tree_arity_log2 " +
                   std::to_string(config->version_tree_arity_log2) + " is outside 1..16");
  }
  uint32_t method;
  CAIRN_RETURN_IF_ERROR(r.Varint32(&method, "config compression_method"));
  if (method > 1) return r.Error("invalid compression_method " + std::to_string(method));
  config->compression.method = static_cast<CompressionMethod>(method);
  config->compression.zstd_level = 0;
  if (config->compression.method == CompressionMethod::kZstd) {
    uint32_t level;
    CAIRN_RETURN_IF_ERROR(r.LE32(&level, "config zstd level"));
    int32_t l = static_cast<int32_t>(level);
    if (l < -131072 || l > 22) {
      return r.Error("zstd level " + std::to_string(l) + " is outside [-131072, 22]");
    }
    config->compression.zstd_level = l;
  }
  return Status::OK();
}

}  // namespace cairn::ocdbt
