#include "cairn/codec/sharding_codec.h"

#include <algorithm>
#include <cstring>

#include "cairn/codec/bytes_codec.h"
#include "cairn/codec/crc32c_codec.h"
#include "cairn/codec/transpose_codec.h"
#include "cairn/util/coding.h"
#include "cairn/util/json.h"

namespace cairn {
namespace {

constexpr uint64_t kMaxInnerChunks = uint64_t{1} << 30;

uint64_t SatAdd(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }
uint64_t SatMul(uint64_t a, uint64_t b) {
  return (b != 0 && a > UINT64_MAX / b) ? UINT64_MAX : a * b;
}

// True if each inner chunk is one contiguous run of the C-order shard: all
// dimensions after the last one where chunk != shard are whole, all before
// it have chunk extent 1.
bool InnerChunksContiguous(const Shape& chunk, const Shape& shard) {
  size_t last = chunk.size();
  for (size_t d = 0; d < chunk.size(); ++d) {
    if (chunk[d] != shard[d]) last = d;
  }
  if (last == chunk.size()) return true;
  for (size_t d = 0; d < last; ++d) {
    if (chunk[d] != 1) return false;
  }
  return true;
}

// Byte offset in the C-order shard of the origin of the inner chunk at
// row-major grid position `linear`.
Index InnerChunkOffset(uint64_t linear, const Shape& grid, const Shape& chunk,
                       const std::vector<Index>& shard_strides) {
  Index offset = 0;
  for (size_t d = grid.size(); d-- > 0;) {
    const Index g = static_cast<Index>(linear % static_cast<uint64_t>(grid[d]));
    linear /= static_cast<uint64_t>(grid[d]);
    offset += g * chunk[d] * shard_strides[d];
  }
  return offset;
}

// Index codecs must produce a fixed size: transpose*, bytes, crc32c*.
Status CheckFixedSizeIndexCodecs(const CodecChain& chain) {
  for (const auto& c : chain.array_codecs()) {
    if (dynamic_cast<const TransposeCodec*>(c.get()) == nullptr) {
      return InvalidArgumentError("sharding_indexed: index_codecs must be fixed-size, `" +
                                  std::string(c->name()) + "` is not allowed");
    }
  }
  if (dynamic_cast<const BytesArrayCodec*>(chain.array_to_bytes().get()) == nullptr) {
    return InvalidArgumentError("sharding_indexed: index_codecs must use the `bytes` codec, not `" +
                                std::string(chain.array_to_bytes()->name()) + "`");
  }
  for (const auto& c : chain.bytes_codecs()) {
    if (dynamic_cast<const Crc32cCodec*>(c.get()) == nullptr) {
      return InvalidArgumentError("sharding_indexed: index_codecs must be fixed-size, `" +
                                  std::string(c->name()) + "` is not allowed");
    }
  }
  return Status::OK();
}

// How many ShardingCodec::FromJson calls are active on this thread: a
// nested sharding codec is parsed by a FromJson call inside its parent's,
// always on the same thread, so this is the nesting depth.
thread_local int parse_depth = 0;

class NestingGuard {
 public:
  NestingGuard() { ++parse_depth; }
  ~NestingGuard() { --parse_depth; }
  NestingGuard(const NestingGuard&) = delete;
  NestingGuard& operator=(const NestingGuard&) = delete;
};

}  // namespace

Shape ShardingCodec::GridShape(const ChunkSpec& shard_spec) const {
  Shape grid(chunk_shape_.size());
  for (size_t d = 0; d < grid.size(); ++d) grid[d] = shard_spec.shape[d] / chunk_shape_[d];
  return grid;
}

ChunkSpec ShardingCodec::InnerSpec(const ChunkSpec& shard_spec) const {
  return ChunkSpec{shard_spec.dtype, chunk_shape_, shard_spec.fill_value};
}

ChunkSpec ShardingCodec::IndexSpec(const ChunkSpec& shard_spec) const {
  Shape shape = GridShape(shard_spec);
  shape.push_back(2);
  return ChunkSpec{DType::kUInt64, std::move(shape), std::vector<uint8_t>(8, 0xff)};
}

uint64_t ShardingCodec::EncodedIndexSize(const ChunkSpec& shard_spec) const {
  return index_codecs_.MaxEncodedSize(IndexSpec(shard_spec));  // exact: fixed-size codecs
}

Result<std::shared_ptr<const ShardingCodec>> ShardingCodec::FromJson(const Json* configuration,
                                                                     const ChunkSpec& spec) {
  NestingGuard guard;
  if (parse_depth > kMaxNesting) {
    return InvalidArgumentError("sharding_indexed: nested more than " +
                                std::to_string(kMaxNesting) + " levels deep");
  }
  if (configuration == nullptr) {
    return InvalidArgumentError("sharding_indexed: missing configuration");
  }
  CAIRN_RETURN_IF_ERROR(CheckOnlyMembers(
      *configuration, {"chunk_shape", "codecs", "index_codecs", "index_location"},
      "sharding_indexed"));
  CAIRN_ASSIGN_OR_RETURN(const Json* shape_json, GetField(*configuration, "chunk_shape"));
  CAIRN_ASSIGN_OR_RETURN(Shape chunk_shape,
                         JsonToIntVector(*shape_json, "sharding_indexed chunk_shape"));
  if (chunk_shape.size() != spec.shape.size()) {
    return InvalidArgumentError("sharding_indexed: chunk_shape " + DumpJson(*shape_json) +
                                " has rank " + std::to_string(chunk_shape.size()) +
                                ", the shard has rank " + std::to_string(spec.shape.size()));
  }
  uint64_t n = 1;
  for (size_t d = 0; d < chunk_shape.size(); ++d) {
    if (chunk_shape[d] < 1 || spec.shape[d] % chunk_shape[d] != 0) {
      return InvalidArgumentError("sharding_indexed: chunk_shape " + DumpJson(*shape_json) +
                                  " does not divide the shard shape " + Json(spec.shape).dump());
    }
    n = SatMul(n, static_cast<uint64_t>(spec.shape[d] / chunk_shape[d]));
  }
  if (n > kMaxInnerChunks) {
    return InvalidArgumentError("sharding_indexed: " + std::to_string(n) +
                                " inner chunks per shard, more than 2^30");
  }
  ShardIndexLocation location = ShardIndexLocation::kEnd;
  if (const Json* loc = FindField(*configuration, "index_location")) {
    CAIRN_ASSIGN_OR_RETURN(std::string s, JsonToString(*loc, "sharding_indexed index_location"));
    if (s == "start") {
      location = ShardIndexLocation::kStart;
    } else if (s != "end") {
      return InvalidArgumentError("sharding_indexed: index_location must be \"start\" or "
                                  "\"end\", got \"" + s + "\"");
    }
  }
  ShardingCodec proto(chunk_shape, CodecChain(), CodecChain(), location);
  CAIRN_ASSIGN_OR_RETURN(const Json* codecs_json, GetField(*configuration, "codecs"));
  auto inner = CodecChain::FromJson(*codecs_json, proto.InnerSpec(spec));
  if (!inner.ok()) return inner.status().Annotate("sharding_indexed codecs");
  CAIRN_ASSIGN_OR_RETURN(const Json* index_json, GetField(*configuration, "index_codecs"));
  auto index = CodecChain::FromJson(*index_json, proto.IndexSpec(spec));
  if (!index.ok()) return index.status().Annotate("sharding_indexed index_codecs");
  CAIRN_RETURN_IF_ERROR(CheckFixedSizeIndexCodecs(*index));
  return std::make_shared<const ShardingCodec>(std::move(chunk_shape), std::move(inner).value(),
                                               std::move(index).value(), location);
}

Json ShardingCodec::ToJson() const {
  Json config = {{"chunk_shape", chunk_shape_},
                 {"codecs", inner_codecs_.ToJson()},
                 {"index_codecs", index_codecs_.ToJson()}};
  if (index_location_ == ShardIndexLocation::kStart) config["index_location"] = "start";
  return {{"name", "sharding_indexed"}, {"configuration", std::move(config)}};
}

uint64_t ShardingCodec::MaxEncodedSize(const ChunkSpec& spec) const {
  // Writers other than cairn may leave gaps between inner chunks: allow
  // twice the dense size plus 1 MiB.
  const Shape grid = GridShape(spec);
  const uint64_t n = static_cast<uint64_t>(NumElements(grid));
  const uint64_t dense =
      SatAdd(EncodedIndexSize(spec), SatMul(n, inner_codecs_.MaxEncodedSize(InnerSpec(spec))));
  return SatAdd(SatMul(dense, 2), uint64_t{1} << 20);
}

Result<ByteView> ShardingCodec::IndexBytes(const ChunkSpec& shard_spec, ByteView shard) const {
  const uint64_t index_size = EncodedIndexSize(shard_spec);
  if (shard.size() < index_size) {
    return DataLossError("sharding_indexed: shard has " + std::to_string(shard.size()) +
                         " bytes, less than its " + std::to_string(index_size) + "-byte index");
  }
  return index_location_ == ShardIndexLocation::kStart ? shard.first(index_size)
                                                       : shard.last(index_size);
}

Result<std::vector<ShardIndexEntry>> ShardingCodec::DecodeIndex(const ChunkSpec& shard_spec,
                                                                ByteView index_bytes) const {
  const uint64_t index_size = EncodedIndexSize(shard_spec);
  if (index_bytes.size() != index_size) {
    return DataLossError("sharding_indexed: index has " + std::to_string(index_bytes.size()) +
                         " bytes, expected " + std::to_string(index_size));
  }
  auto decoded = index_codecs_.Decode(IndexSpec(shard_spec), index_bytes);
  if (!decoded.ok()) return decoded.status().Annotate("sharding_indexed index");
  const size_t n = decoded->size() / 16;
  std::vector<ShardIndexEntry> entries(n);
  for (size_t i = 0; i < n; ++i) {
    ShardIndexEntry& e = entries[i];
    std::memcpy(&e.offset, decoded->data() + 16 * i, 8);
    std::memcpy(&e.nbytes, decoded->data() + 16 * i + 8, 8);
    if (e.missing()) continue;
    if (e.offset == ShardIndexEntry::kMissing || e.nbytes == ShardIndexEntry::kMissing ||
        e.offset > UINT64_MAX - e.nbytes) {
      return DataLossError("sharding_indexed: index entry " + std::to_string(i) + " (offset " +
                           std::to_string(e.offset) + ", nbytes " + std::to_string(e.nbytes) +
                           ") is invalid");
    }
  }
  return entries;
}

Status ValidateShardIndex(std::span<const ShardIndexEntry> entries, uint64_t shard_size) {
  for (size_t i = 0; i < entries.size(); ++i) {
    const ShardIndexEntry& e = entries[i];
    if (e.missing()) continue;
    if (e.offset > UINT64_MAX - e.nbytes || e.offset + e.nbytes > shard_size) {
      return DataLossError("sharding_indexed: inner chunk " + std::to_string(i) + " at offset " +
                           std::to_string(e.offset) + " with " + std::to_string(e.nbytes) +
                           " bytes lies past the end of the " + std::to_string(shard_size) +
                           "-byte shard");
    }
  }
  return Status::OK();
}

Result<Buffer> ShardingCodec::Encode(const ChunkSpec& spec, ByteView array,
                                     const EncodeOptions& options) const {
  const size_t es = DTypeSize(spec.dtype);
  if (array.size() != spec.num_bytes() || spec.shape.size() != chunk_shape_.size()) {
    return InvalidArgumentError("sharding_indexed: array does not match the shard spec");
  }
  const Shape grid = GridShape(spec);
  const uint64_t n = static_cast<uint64_t>(NumElements(grid));
  const ChunkSpec inner = InnerSpec(spec);
  const uint64_t index_size = EncodedIndexSize(spec);
  const bool contiguous = InnerChunksContiguous(chunk_shape_, spec.shape);
  const bool identity = inner_codecs_.IsIdentity(inner);
  const std::vector<Index> shard_strides = CStrides(spec.shape, es);
  const std::vector<Index> inner_strides = CStrides(chunk_shape_, es);

  // Room for the whole shard when chunks stay uncompressed; compressed
  // shards are usually smaller. Pages never written are never touched.
  const uint64_t reserve =
      std::min<uint64_t>(SatAdd(array.size(), SatAdd(index_size, 4096)),
                         SatAdd(index_size, SatMul(n, inner_codecs_.MaxEncodedSize(inner))));
  Buffer out;
  if (index_location_ == ShardIndexLocation::kStart) {
    out.reserve(static_cast<size_t>(reserve));
    out.resize(static_cast<size_t>(index_size));
  }
  Buffer index(static_cast<size_t>(n * 16));
  Buffer scratch;
  if (!contiguous) scratch.resize(inner.num_bytes());
  for (uint64_t i = 0; i < n; ++i) {
    const Index offset = InnerChunkOffset(i, grid, chunk_shape_, shard_strides);
    ByteView chunk;
    if (contiguous) {
      chunk = array.subspan(static_cast<size_t>(offset), inner.num_bytes());
    } else {
      StridedCopy(array.data() + offset, shard_strides, scratch.data(), inner_strides,
                  chunk_shape_, es);
      chunk = scratch.view();
    }
    ShardIndexEntry e;
    if (options.store_data_equal_to_fill_value || !IsFillValue(inner, chunk)) {
      e.offset = out.size();
      if (identity) {
        if (out.capacity() == 0) out.reserve(static_cast<size_t>(reserve));
        out.append(chunk);
      } else {
        CAIRN_ASSIGN_OR_RETURN(Buffer encoded, inner_codecs_.Encode(inner, chunk, options));
        if (out.capacity() == 0) {
          // First chunk of an index-at-end shard: take the buffer as is (no
          // copy; a one-chunk shard then only appends its index).
          out = std::move(encoded);
          out.reserve(static_cast<size_t>(
              std::min<uint64_t>(reserve, SatAdd(SatMul(out.size(), n - i), index_size + 64))));
        } else {
          out.append(encoded.view());
        }
      }
      e.nbytes = out.size() - e.offset;
    }
    std::memcpy(index.data() + 16 * i, &e.offset, 8);
    std::memcpy(index.data() + 16 * i + 8, &e.nbytes, 8);
  }
  CAIRN_ASSIGN_OR_RETURN(Buffer encoded_index, index_codecs_.Encode(IndexSpec(spec), index.view()));
  if (encoded_index.size() != index_size) {
    return InternalError("sharding_indexed: encoded index has " +
                         std::to_string(encoded_index.size()) + " bytes, expected " +
                         std::to_string(index_size));
  }
  if (index_location_ == ShardIndexLocation::kStart) {
    if (index_size > 0) std::memcpy(out.data(), encoded_index.data(), index_size);
  } else {
    out.append(encoded_index.view());
  }
  return out;
}

Result<Buffer> ShardingCodec::Decode(const ChunkSpec& spec, ByteView encoded) const {
  const size_t es = DTypeSize(spec.dtype);
  if (spec.fill_value.size() != es || spec.shape.size() != chunk_shape_.size()) {
    return InvalidArgumentError("sharding_indexed: chunk spec has no valid fill value or rank");
  }
  CAIRN_ASSIGN_OR_RETURN(ByteView index_bytes, IndexBytes(spec, encoded));
  CAIRN_ASSIGN_OR_RETURN(std::vector<ShardIndexEntry> entries, DecodeIndex(spec, index_bytes));
  CAIRN_RETURN_IF_ERROR(ValidateShardIndex(entries, encoded.size()));
  const Shape grid = GridShape(spec);
  const ChunkSpec inner = InnerSpec(spec);
  const std::vector<Index> shard_strides = CStrides(spec.shape, es);
  const std::vector<Index> inner_strides = CStrides(chunk_shape_, es);
  if (entries.size() == 1 && !entries[0].missing()) {
    // One inner chunk spanning the shard (Orbax's layout): decoded in place.
    const ByteView bytes = encoded.subspan(static_cast<size_t>(entries[0].offset),
                                           static_cast<size_t>(entries[0].nbytes));
    auto chunk = inner_codecs_.Decode(inner, bytes);
    if (!chunk.ok()) return chunk.status().Annotate("sharding_indexed inner chunk 0");
    if (chunk->size() != spec.num_bytes()) {
      return DataLossError("sharding_indexed: inner chunk 0 decoded to " +
                           std::to_string(chunk->size()) + " bytes, expected " +
                           std::to_string(spec.num_bytes()));
    }
    return std::move(chunk).value();
  }
  Buffer out(spec.num_bytes());
  bool any_missing = false;
  for (const ShardIndexEntry& e : entries) any_missing |= e.missing();
  if (any_missing) {
    FillWithElement(out.data(), static_cast<size_t>(NumElements(spec.shape)),
                    spec.fill_value.data(), es);
  }
  for (size_t i = 0; i < entries.size(); ++i) {
    const ShardIndexEntry& e = entries[i];
    if (e.missing()) continue;
    auto chunk = inner_codecs_.Decode(
        inner, encoded.subspan(static_cast<size_t>(e.offset), static_cast<size_t>(e.nbytes)));
    if (!chunk.ok()) {
      return chunk.status().Annotate("sharding_indexed inner chunk " + std::to_string(i));
    }
    if (chunk->size() != inner.num_bytes()) {
      return DataLossError("sharding_indexed: inner chunk " + std::to_string(i) + " decoded to " +
                           std::to_string(chunk->size()) + " bytes, expected " +
                           std::to_string(inner.num_bytes()));
    }
    const Index offset = InnerChunkOffset(i, grid, chunk_shape_, shard_strides);
    StridedCopy(chunk->data(), inner_strides, out.data() + offset, shard_strides, chunk_shape_, es);
  }
  return out;
}

}  // namespace cairn
