// The database configuration stored at the start of every manifest (docs/formats/ocdbt.md).
//
// Pure functions. Thread safety: value types.
#pragma once

#include <array>
#include <cstdint>

#include "cairn/kvstore/ocdbt/format/envelope.h"
#include "cairn/kvstore/ocdbt/format/field_reader.h"
#include "cairn/util/buffer.h"

namespace cairn::ocdbt {

enum class ManifestKind : uint8_t { kSingle = 0, kNumbered = 1 };

struct Config {
  std::array<uint8_t, 16> uuid{};
  ManifestKind manifest_kind = ManifestKind::kSingle;
  uint32_t max_inline_value_bytes = 100;
  uint32_t max_decoded_node_bytes = 8388608;  // 0 = unlimited
  uint8_t version_tree_arity_log2 = 4;        // 1..16
  CompressionOptions compression;             // zstd level 0 by default

  bool operator==(const Config& o) const {
    return uuid == o.uuid && manifest_kind == o.manifest_kind &&
           max_inline_value_bytes == o.max_inline_value_bytes &&
           max_decoded_node_bytes == o.max_decoded_node_bytes &&
           version_tree_arity_log2 == o.version_tree_arity_log2 &&
           compression.method == o.compression.method &&
           compression.zstd_level == o.compression.zstd_level;
  }
};

// Largest inline value a reader accepts (kMaxInlineValueLength).
inline constexpr uint64_t kMaxInlineValueBytes = uint64_t{1} << 20;

void EncodeConfig(const Config& config, Buffer* out);

// Errors: DataLoss for a truncated config, manifest_kind > 1, arity outside
// 1..16, compression method > 1, or a zstd level outside [-131072, 22].
Status DecodeConfig(FieldReader& r, Config* config);

}  // namespace cairn::ocdbt
