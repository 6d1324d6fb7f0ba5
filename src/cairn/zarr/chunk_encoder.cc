#include "cairn/zarr/chunk_encoder.h"

#include <algorithm>

#include "cairn/zarr/shard_io.h"

namespace cairn {

Box ChunkValidBox(const ArrayMetadata& m, std::span<const Index> cell) {
  Box b;
  for (size_t d = 0; d < m.shape.size(); ++d) {
    const Index lo = cell[d] * m.chunk_shape[d];
    b.origin.push_back(lo);
    b.shape.push_back(std::max<Index>(0, std::min(m.chunk_shape[d], m.shape[d] - lo)));
  }
  return b;
}

Result<EncodedChunk> EncodeChunk(const ArrayMetadata& m, std::span<const Index> cell,
                                 ByteView valid_data, bool store_fill) {
  const size_t rank = m.shape.size();
  if (cell.size() != rank) {
    return InvalidArgumentError("EncodeChunk: cell rank " + std::to_string(cell.size()) +
                                " differs from the array's rank " + std::to_string(rank));
  }
  for (size_t d = 0; d < rank; ++d) {
    if (cell[d] < 0 || cell[d] * m.chunk_shape[d] >= std::max<Index>(m.shape[d], 1)) {
      return InvalidArgumentError("EncodeChunk: cell outside the chunk grid in dimension " +
                                  std::to_string(d));
    }
  }
  const size_t elem = DTypeSize(m.dtype);
  const Box valid = ChunkValidBox(m, cell);
  if (valid_data.size() != static_cast<size_t>(valid.num_elements()) * elem) {
    return InvalidArgumentError("EncodeChunk: input of " + std::to_string(valid_data.size()) +
                                " bytes for a chunk part of " + valid.ToString());
  }
  EncodedChunk out;
  out.key = m.chunk_key_encoding.FormatKey(cell);
  store_fill = store_fill || m.fill_value_is_null;
  const ChunkSpec spec = m.chunk_spec();
  const Shape& chunk_shape = m.chunk_shape;
  const bool whole = valid.shape == chunk_shape;

  // The whole chunk, padded when it sticks out of the array.
  ByteView chunk = valid_data;
  Buffer padded;
  if (!whole) {
    padded.resize(spec.num_bytes());
    FillWithElement(padded.data(), spec.num_bytes() / elem, m.fill_value.data(), elem);
    Box local = valid;
    for (size_t d = 0; d < rank; ++d) local.origin[d] = 0;
    CopyBoxIntersection(valid_data.data(), local, padded.data(), Box::FromShape(chunk_shape), elem);
    chunk = padded.view();
  }
  if (const auto* sharding = internal_zarr::TopLevelSharding(m.codecs)) {
    Box rel = valid;
    for (size_t d = 0; d < rank; ++d) rel.origin[d] = 0;
    CAIRN_ASSIGN_OR_RETURN(auto shard, internal_zarr::EncodeShard(*sharding, spec, chunk, rel, store_fill));
    if (!shard) {
      out.omit = true;
    } else {
      out.bytes = std::move(*shard);
    }
    return out;
  }
  if (!store_fill && IsFillValue(spec, chunk)) {
    out.omit = true;
    return out;
  }
  if (m.codecs.IsIdentity(spec)) {
    if (whole) {
      out.as_is = true;
    } else {
      out.bytes = std::move(padded);
    }
    return out;
  }
  EncodeOptions options;
  options.store_data_equal_to_fill_value = store_fill;
  CAIRN_ASSIGN_OR_RETURN(out.bytes, m.codecs.Encode(spec, chunk, options));
  return out;
}

}  // namespace cairn
