// The zarr v3 `transpose` codec (array -> array). Encoded dimension i is
// decoded dimension order[i]. Configuration `{"order": [p0, ...]}`; the
// legacy "C" (identity) and "F" (reversed) forms are accepted when parsing
// and always written back as an explicit permutation.
//
// Thread safety: immutable; all methods may be called concurrently.
#pragma once

#include <memory>
#include <vector>

#include "cairn/codec/codec.h"

namespace cairn {

class TransposeCodec final : public ArrayCodec {
 public:
  // REQUIRES: `order` is a permutation of 0..rank-1 (FromJson checks it).
  explicit TransposeCodec(std::vector<int64_t> order) : order_(std::move(order)) {}

  // Parses the configuration for chunks of `spec`. InvalidArgument when
  // `order` is missing, not a permutation, or of the wrong rank.
  static Result<std::shared_ptr<const TransposeCodec>> FromJson(const Json* configuration,
                                                                const ChunkSpec& spec);

  std::string_view name() const override { return "transpose"; }
  Json ToJson() const override;

  ChunkSpec EncodedSpec(const ChunkSpec& decoded) const override;
  Result<Buffer> Encode(const ChunkSpec& decoded, ByteView array) const override;
  Result<Buffer> Decode(const ChunkSpec& decoded, ByteView encoded) const override;

  const std::vector<int64_t>& order() const { return order_; }

 private:
  std::vector<int64_t> order_;
};

}  // namespace cairn
