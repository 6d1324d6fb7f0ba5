// The zarr v3 `sharding_indexed` codec (array -> bytes): a shard holds a
// grid of inner chunks, each encoded with the inner codec chain, plus an
// index of [offset, nbytes] uint64 pairs (0xFFFF... for a missing inner
// chunk), encoded with the index codecs (fixed-size: `bytes` and `crc32c`
// only, optionally after `transpose`), at the end of the shard (default) or
// at its start.
//
// Configuration as TensorStore writes it: `{"chunk_shape": [...],
// "codecs": [...], "index_codecs": [...]}` plus `"index_location": "start"`
// only when not at the end.
//
// Encoding writes the present inner chunks contiguously in row-major grid
// order, then the index (or the index first). Inner chunks entirely equal to
// the fill value are omitted unless EncodeOptions asks to store them.
//
// Besides Encode/Decode of whole shards, the helpers below let a reader
// fetch only the index and then single inner chunks with ranged reads.
//
// Thread safety: immutable; all methods may be called concurrently.
#pragma once

#include <memory>
#include <vector>

#include "cairn/codec/codec.h"

namespace cairn {

enum class ShardIndexLocation : uint8_t { kStart, kEnd };

// One index entry: where an inner chunk's bytes are in the shard.
struct ShardIndexEntry {
  static constexpr uint64_t kMissing = ~uint64_t{0};
  uint64_t offset = kMissing;
  uint64_t nbytes = kMissing;

  bool missing() const { return offset == kMissing && nbytes == kMissing; }
  bool operator==(const ShardIndexEntry&) const = default;
};

class ShardingCodec final : public ArrayToBytesCodec {
 public:
  // REQUIRES: arguments validated as FromJson does.
  ShardingCodec(Shape chunk_shape, CodecChain inner_codecs, CodecChain index_codecs,
                ShardIndexLocation index_location)
      : chunk_shape_(std::move(chunk_shape)),
        inner_codecs_(std::move(inner_codecs)),
        index_codecs_(std::move(index_codecs)),
        index_location_(index_location) {}

  // The most sharding_indexed codecs one chain may nest inside each other
  // (through `codecs` or `index_codecs`): parsing, encoding and decoding
  // recurse once per level (docs/limits.md).
  static constexpr int kMaxNesting = 8;

  // Parses the configuration for shards of `spec` (the outer chunk).
  // InvalidArgument when chunk_shape has the wrong rank or does not divide
  // the shard shape, the grid has more than 2^30 inner chunks, `codecs` or
  // `index_codecs` is missing or invalid, the index codecs are not
  // fixed-size, index_location is not "start"/"end", or sharding codecs
  // nest more than kMaxNesting deep.
  static Result<std::shared_ptr<const ShardingCodec>> FromJson(const Json* configuration,
                                                               const ChunkSpec& spec);

  std::string_view name() const override { return "sharding_indexed"; }
  Json ToJson() const override;

  using ArrayToBytesCodec::Encode;
  Result<Buffer> Encode(const ChunkSpec& spec, ByteView array) const override {
    return Encode(spec, array, EncodeOptions());
  }
  Result<Buffer> Encode(const ChunkSpec& spec, ByteView array,
                        const EncodeOptions& options) const override;
  // DataLoss for a shard smaller than its index, an index that fails its
  // checksum, an entry past the end of the shard or overflowing, or an inner
  // chunk that fails to decode. Missing inner chunks read as the fill value.
  Result<Buffer> Decode(const ChunkSpec& spec, ByteView encoded) const override;
  uint64_t MaxEncodedSize(const ChunkSpec& spec) const override;

  // ---- Pure helpers for ranged reads -------------------------------------

  const Shape& chunk_shape() const { return chunk_shape_; }
  const CodecChain& inner_codecs() const { return inner_codecs_; }
  const CodecChain& index_codecs() const { return index_codecs_; }
  ShardIndexLocation index_location() const { return index_location_; }

  // Inner chunks per dimension: shard shape / chunk shape.
  Shape GridShape(const ChunkSpec& shard_spec) const;
  // The spec of one inner chunk (same dtype and fill value).
  ChunkSpec InnerSpec(const ChunkSpec& shard_spec) const;
  // Size in bytes of the encoded index of a shard of `shard_spec`.
  uint64_t EncodedIndexSize(const ChunkSpec& shard_spec) const;
  // Decodes an encoded index (exactly EncodedIndexSize bytes, else
  // DataLoss) into one entry per inner chunk in row-major grid order.
  // Checks the index checksum and that entries are either missing or have
  // offset + nbytes without overflow.
  Result<std::vector<ShardIndexEntry>> DecodeIndex(const ChunkSpec& shard_spec,
                                                   ByteView index_bytes) const;
  // The encoded index inside a whole shard (DataLoss if too short).
  Result<ByteView> IndexBytes(const ChunkSpec& shard_spec, ByteView shard) const;

 private:
  ChunkSpec IndexSpec(const ChunkSpec& shard_spec) const;

  Shape chunk_shape_;
  CodecChain inner_codecs_;
  CodecChain index_codecs_;
  ShardIndexLocation index_location_;
};

// Checks that every present entry lies within a shard of `shard_size`
// bytes; DataLoss naming the first inner chunk that does not.
Status ValidateShardIndex(std::span<const ShardIndexEntry> entries, uint64_t shard_size);

}  // namespace cairn
