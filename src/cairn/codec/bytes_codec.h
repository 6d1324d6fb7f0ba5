// The zarr v3 `bytes` codec (array -> bytes): elements in C order, each in
// the configured byte order. Configuration `{"endian": "little"|"big"}`,
// omitted for 1-byte data types.
//
// Thread safety: immutable; all methods may be called concurrently.
#pragma once

#include <memory>
#include <optional>

#include "cairn/codec/codec.h"

namespace cairn {

enum class Endian : uint8_t { kLittle, kBig };

class BytesArrayCodec final : public ArrayToBytesCodec {
 public:
  // `endian` is nullopt only for 1-byte data types.
  explicit BytesArrayCodec(std::optional<Endian> endian) : endian_(endian) {}

  // Parses the `configuration` (nullptr when absent) for chunks of `spec`.
  // InvalidArgument if `endian` is missing for a multi-byte type, or is not
  // "little"/"big", or other members are present.
  static Result<std::shared_ptr<const BytesArrayCodec>> FromJson(const Json* configuration,
                                                                 const ChunkSpec& spec);

  std::string_view name() const override { return "bytes"; }
  Json ToJson() const override;

  using ArrayToBytesCodec::Encode;
  Result<Buffer> Encode(const ChunkSpec& spec, ByteView array) const override;
  // DataLoss if encoded.size() != spec.num_bytes().
  Result<Buffer> Decode(const ChunkSpec& spec, ByteView encoded) const override;
  bool IsIdentity(const ChunkSpec& spec) const override;
  uint64_t MaxEncodedSize(const ChunkSpec& spec) const override { return spec.num_bytes(); }

  std::optional<Endian> endian() const { return endian_; }

 private:
  // True when stored bytes differ from native ones for `spec`.
  bool NeedsSwap(const ChunkSpec& spec) const;

  std::optional<Endian> endian_;
};

}  // namespace cairn
