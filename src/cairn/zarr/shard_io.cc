#include "cairn/zarr/shard_io.h"

#include <cstring>

namespace cairn::internal_zarr {

bool NextCell(std::vector<Index>& cell, std::span<const Index> lo, std::span<const Index> hi) {
  for (size_t d = cell.size(); d-- > 0;) {
    if (cell[d] < hi[d]) {
      ++cell[d];
      return true;
    }
    cell[d] = lo[d];
  }
  return false;
}

void CellRange(const Box& box, std::span<const Index> chunk_shape, std::vector<Index>& lo,
               std::vector<Index>& hi) {
  lo.resize(box.rank());
  hi.resize(box.rank());
  for (size_t d = 0; d < box.rank(); ++d) {
    lo[d] = box.origin[d] / chunk_shape[d];
    hi[d] = (box.origin[d] + box.shape[d] - 1) / chunk_shape[d];
  }
}

uint8_t* Offset(uint8_t* base, std::span<const Index> pos, std::span<const Index> origin,
                std::span<const Index> strides) {
  for (size_t d = 0; d < pos.size(); ++d) base += (pos[d] - origin[d]) * strides[d];
  return base;
}

bool IsCContiguous(std::span<const Index> strides, std::span<const Index> shape,
                   size_t elem_size) {
  Index expected = static_cast<Index>(elem_size);
  for (size_t d = shape.size(); d-- > 0;) {
    if (shape[d] != 1 && strides[d] != expected) return false;
    expected *= shape[d];
  }
  return true;
}

void FillStrided(uint8_t* dst, std::span<const Index> dst_strides, std::span<const Index> shape,
                 const std::vector<uint8_t>& elem) {
  const std::vector<Index> zero(shape.size(), 0);
  StridedCopy(elem.data(), zero, dst, dst_strides, shape, elem.size());
}

const ShardingCodec* TopLevelSharding(const CodecChain& chain) {
  if (!chain.array_codecs().empty() || !chain.bytes_codecs().empty()) return nullptr;
  return dynamic_cast<const ShardingCodec*>(chain.array_to_bytes().get());
}

namespace {

std::string CellString(std::span<const Index> cell) {
  std::string s = "[";
  for (size_t i = 0; i < cell.size(); ++i) s += (i ? "," : "") + std::to_string(cell[i]);
  return s + "]";
}

// Row-major linear index of `cell` in `grid`.
size_t Linear(std::span<const Index> cell, std::span<const Index> grid) {
  size_t n = 0;
  for (size_t d = 0; d < cell.size(); ++d) n = n * static_cast<size_t>(grid[d]) + cell[d];
  return n;
}

Box CellBox(std::span<const Index> cell, std::span<const Index> chunk_shape) {
  Box b;
  for (size_t d = 0; d < cell.size(); ++d) {
    b.origin.push_back(cell[d] * chunk_shape[d]);
    b.shape.push_back(chunk_shape[d]);
  }
  return b;
}

// A ranged Get whose range does not fit the value fails with
// InvalidArgument; for a shard that means its bytes are inconsistent.
Result<std::optional<Buffer>> GetRange(KvStore& store, const std::string& key,
                                       const ByteRange& range, const std::string& what) {
  auto got = store.Get(key, range);
  if (!got.ok() && got.status().code() == StatusCode::kInvalidArgument) {
    return DataLossError(what + " (" + std::string(got.status().message()) + ")");
  }
  return got;
}

}  // namespace

Status ReadShardRegion(KvStore& store, const std::string& key, const ShardingCodec& codec,
                       const ChunkSpec& shard_spec, const Box& shard_box, const Box& valid,
                       const Box& inter, uint8_t* dst, std::span<const Index> dst_strides) {
  const Shape grid = codec.GridShape(shard_spec);
  const ChunkSpec inner = codec.InnerSpec(shard_spec);
  const size_t elem = DTypeSize(shard_spec.dtype);
  const uint64_t index_size = codec.EncodedIndexSize(shard_spec);
  std::optional<Buffer> whole;
  std::vector<ShardIndexEntry> entries;
  if (inter == valid) {
    CAIRN_ASSIGN_OR_RETURN(whole, store.Get(key));
    if (!whole) {
      FillStrided(dst, dst_strides, inter.shape, shard_spec.fill_value);
      return Status::OK();
    }
    CAIRN_ASSIGN_OR_RETURN(ByteView index_bytes, codec.IndexBytes(shard_spec, *whole));
    CAIRN_ASSIGN_OR_RETURN(entries, codec.DecodeIndex(shard_spec, index_bytes));
    CAIRN_RETURN_IF_ERROR(ValidateShardIndex(entries, whole->size()));
  } else {
    const ByteRange range = codec.index_location() == ShardIndexLocation::kEnd
                                ? ByteRange::Suffix(index_size)
                                : ByteRange::Range(0, index_size);
    CAIRN_ASSIGN_OR_RETURN(
        std::optional<Buffer> index_bytes,
        GetRange(store, key, range,
                 "shard is shorter than its " + std::to_string(index_size) + "-byte index"));
    if (!index_bytes) {
      FillStrided(dst, dst_strides, inter.shape, shard_spec.fill_value);
      return Status::OK();
    }
    CAIRN_ASSIGN_OR_RETURN(entries, codec.DecodeIndex(shard_spec, *index_bytes));
  }
  const Box rel(
      [&] {
        std::vector<Index> o(inter.rank());
        for (size_t d = 0; d < inter.rank(); ++d) o[d] = inter.origin[d] - shard_box.origin[d];
        return o;
      }(),
      inter.shape);
  const std::vector<Index> inner_strides = CStrides(inner.shape, elem);
  std::vector<Index> lo, hi;
  CellRange(rel, inner.shape, lo, hi);
  std::vector<Index> cell = lo;
  do {
    const Box inner_box = CellBox(cell, inner.shape);
    const Box sub = Intersect(inner_box, rel);
    uint8_t* d = Offset(dst, sub.origin, rel.origin, dst_strides);
    const ShardIndexEntry& e = entries[Linear(cell, grid)];
    if (e.missing()) {
      FillStrided(d, dst_strides, sub.shape, shard_spec.fill_value);
      continue;
    }
    const std::string where = "inner chunk " + CellString(cell);
    std::optional<Buffer> fetched;
    ByteView bytes;
    if (whole) {
      bytes = whole->view().subspan(e.offset, e.nbytes);
    } else {
      CAIRN_ASSIGN_OR_RETURN(
          fetched, GetRange(store, key, ByteRange::Range(e.offset, e.nbytes),
                            where + ": index entry [" + std::to_string(e.offset) + ", +" +
                                std::to_string(e.nbytes) + ") is past the end of the shard"));
      if (!fetched) return DataLossError("shard disappeared while reading " + where);
      bytes = fetched->view();
    }
    if (sub == inner_box && IsCContiguous(dst_strides, sub.shape, elem)) {
      // A whole inner chunk laid out as the destination: decode in place.
      CAIRN_RETURN_IF_ERROR(
          codec.inner_codecs().DecodeInto(inner, bytes, MutableByteView(d, inner.num_bytes())).Annotate(where));
      continue;
    }
    auto decoded = codec.inner_codecs().Decode(inner, bytes);
    if (!decoded.ok()) return decoded.status().Annotate(where);
    const uint8_t* src = Offset(decoded->data(), sub.origin, inner_box.origin, inner_strides);
    StridedCopy(src, inner_strides, d, dst_strides, sub.shape, elem);
  } while (NextCell(cell, lo, hi));
  return Status::OK();
}

Result<std::optional<Buffer>> EncodeShard(const ShardingCodec& codec, const ChunkSpec& shard_spec,
                                          ByteView shard_array, const Box& valid,
                                          bool store_fill) {
  const Shape grid = codec.GridShape(shard_spec);
  const ChunkSpec inner = codec.InnerSpec(shard_spec);
  const size_t elem = DTypeSize(shard_spec.dtype);
  const size_t n = static_cast<size_t>(NumElements(grid));
  const std::vector<Index> shard_strides = CStrides(shard_spec.shape, elem);
  const std::vector<Index> inner_strides = CStrides(inner.shape, elem);
  std::vector<ShardIndexEntry> entries(n);
  Buffer data;
  Buffer inner_buf;  // allocated for the first inner chunk that needs a copy
  bool any = false;
  const std::vector<Index> lo(grid.size(), 0);
  std::vector<Index> hi(grid.size());
  for (size_t d = 0; d < grid.size(); ++d) hi[d] = grid[d] - 1;
  std::vector<Index> cell = lo;
  const std::vector<Index> zero(grid.size(), 0);
  EncodeOptions options;
  options.store_data_equal_to_fill_value = store_fill;
  do {
    const Box inner_box = CellBox(cell, inner.shape);
    if (Intersect(inner_box, valid).empty()) continue;
    const uint8_t* src = Offset(const_cast<uint8_t*>(shard_array.data()), inner_box.origin, zero,
                                shard_strides);
    // An inner chunk lying contiguously in the shard (the whole shard, as
    // Orbax writes them, or a run of full rows) is encoded from there.
    ByteView inner_bytes(src, inner.num_bytes());
    if (!IsCContiguous(shard_strides, inner.shape, elem)) {
      if (inner_buf.empty()) inner_buf.resize(inner.num_bytes());
      StridedCopy(src, shard_strides, inner_buf.data(), inner_strides, inner.shape, elem);
      inner_bytes = inner_buf.view();
    }
    if (!store_fill && IsFillValue(inner, inner_bytes)) continue;
    CAIRN_ASSIGN_OR_RETURN(Buffer enc, codec.inner_codecs().Encode(inner, inner_bytes, options));
    entries[Linear(cell, grid)] = {data.size(), enc.size()};
    if (data.empty()) {
      data = std::move(enc);  // the first encoded chunk starts the shard: no copy
    } else {
      data.append(enc);
    }
    any = true;
  } while (NextCell(cell, lo, hi));
  if (!any) return std::optional<Buffer>();

  const uint64_t index_size = codec.EncodedIndexSize(shard_spec);
  const bool at_start = codec.index_location() == ShardIndexLocation::kStart;
  Buffer index(n * 16);
  for (size_t i = 0; i < n; ++i) {
    uint64_t pair[2] = {entries[i].offset, entries[i].nbytes};
    if (!entries[i].missing() && at_start) pair[0] += index_size;
    std::memcpy(index.data() + 16 * i, pair, 16);
  }
  Shape index_shape = grid;
  index_shape.push_back(2);
  const ChunkSpec index_spec{DType::kUInt64, index_shape, std::vector<uint8_t>(8, 0xff)};
  CAIRN_ASSIGN_OR_RETURN(Buffer enc_index, codec.index_codecs().Encode(index_spec, index));
  if (enc_index.size() != index_size) {
    return InternalError("sharding_indexed: encoded index has " + std::to_string(enc_index.size()) +
                         " bytes, expected " + std::to_string(index_size));
  }
  if (!at_start) {
    data.append(enc_index);
    return std::optional<Buffer>(std::move(data));
  }
  Buffer out;
  out.reserve(enc_index.size() + data.size());
  out.append(enc_index);
  out.append(data);
  return std::optional<Buffer>(std::move(out));
}

}  // namespace cairn::internal_zarr
