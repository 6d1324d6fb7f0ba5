#include "cairn/engine/restore_decode.h"

#include "cairn/zarr/shard_io.h"

namespace cairn::engine {

using internal_zarr::FillStrided;
using internal_zarr::Offset;

size_t Linear(const std::vector<Index>& cell, const Shape& grid) {
  size_t n = 0;
  for (size_t d = 0; d < cell.size(); ++d) n = n * static_cast<size_t>(grid[d]) + static_cast<size_t>(cell[d]);
  return n;
}

void FillParts(const ArrayRestorePlan& p, const std::vector<PartToFill>& parts, const uint8_t* src,
               const Box& src_box) {
  const size_t elem = DTypeSize(p.spec.dtype);
  const std::vector<Index> src_strides = CStrides(src_box.shape, elem);
  for (const PartToFill& part : parts) {
    const Destination& d = p.dests[part.dest];
    uint8_t* out = Offset(d.data, part.inter.origin, d.box.origin, d.byte_strides);
    if (src == nullptr) {
      FillStrided(out, d.byte_strides, part.inter.shape, p.spec.fill_value);
      continue;
    }
    const uint8_t* in = Offset(const_cast<uint8_t*>(src), part.inter.origin, src_box.origin, src_strides);
    StridedCopy(in, src_strides, out, d.byte_strides, part.inter.shape, elem);
  }
}

MutableByteView WholeChunkDestination(const ArrayRestorePlan& p, const std::vector<PartToFill>& parts,
                                      const Box& box) {
  if (parts.size() != 1 || parts[0].inter.origin != box.origin || parts[0].inter.shape != box.shape) {
    return {};
  }
  const Destination& d = p.dests[parts[0].dest];
  const size_t elem = DTypeSize(p.spec.dtype);
  const std::vector<Index> c = CStrides(box.shape, elem);
  for (size_t i = 0; i < box.rank(); ++i) {
    if (box.shape[i] > 1 && d.byte_strides[i] != c[i]) return {};
  }
  uint8_t* out = Offset(d.data, box.origin, d.box.origin, d.byte_strides);
  return MutableByteView(out, static_cast<size_t>(box.num_elements()) * elem);
}

std::shared_ptr<MappedBytes>* WholeChunkMappedSlot(const ArrayRestorePlan& p, const ChunkToRead& c) {
  if (c.parts.size() != 1) return nullptr;
  const Destination& d = p.dests[c.parts[0].dest];
  if (d.mapped == nullptr || d.box != c.box || c.parts[0].inter != c.box) return nullptr;
  if (WholeChunkDestination(p, c.parts, c.box).data() != d.data) return nullptr;
  return d.mapped;
}

namespace {

// Decodes a (inner) chunk of `spec` (its box `box`) into the parts it fills:
// straight into the destination where WholeChunkDestination allows, else
// through a chunk-sized buffer (none where the chain is the identity).
Status DecodeIntoParts(const ArrayRestorePlan& p, const CodecChain& chain, const ChunkSpec& spec,
                       ByteView stored, const std::vector<PartToFill>& parts, const Box& box) {
  const size_t n = spec.num_bytes();
  if (MutableByteView out = WholeChunkDestination(p, parts, box); out.size() == n && n != 0) {
    return chain.DecodeInto(spec, stored, out);
  }
  if (chain.IsIdentity(spec)) {
    if (stored.size() != n) {
      return DataLossError("chunk has " + std::to_string(stored.size()) + " bytes, expected " +
                           std::to_string(n));
    }
    FillParts(p, parts, stored.data(), box);
    return Status::OK();
  }
  CAIRN_ASSIGN_OR_RETURN(Buffer decoded, chain.Decode(spec, stored));
  if (decoded.size() != n) {
    return DataLossError("chunk decoded to " + std::to_string(decoded.size()) + " bytes, expected " +
                         std::to_string(n));
  }
  FillParts(p, parts, decoded.data(), box);
  return Status::OK();
}

}  // namespace

Status DeliverInner(const ArrayRestorePlan& p, const InnerChunkToRead& ic, std::optional<ByteView> bytes) {
  if (!bytes) {
    FillParts(p, ic.parts, nullptr, ic.box);
    return Status::OK();
  }
  return DecodeIntoParts(p, p.sharding->inner_codecs(), p.sharding->InnerSpec(p.spec), *bytes, ic.parts,
                         ic.box)
      .Annotate("inner chunk " + ic.box.ToString());
}

Status DeliverChunk(const ArrayRestorePlan& p, const ChunkToRead& c, std::optional<ByteView> value) {
  if (!value) {
    FillParts(p, c.parts, nullptr, c.box);
    return Status::OK();
  }
  if (p.sharding == nullptr) return DecodeIntoParts(p, p.array->metadata().codecs, p.spec, *value, c.parts, c.box);
  CAIRN_ASSIGN_OR_RETURN(ByteView index_bytes, p.sharding->IndexBytes(p.spec, *value));
  CAIRN_ASSIGN_OR_RETURN(auto entries, p.sharding->DecodeIndex(p.spec, index_bytes));
  CAIRN_RETURN_IF_ERROR(ValidateShardIndex(entries, value->size()));
  const Shape grid = p.sharding->GridShape(p.spec);
  for (const InnerChunkToRead& ic : c.inner) {
    const ShardIndexEntry& e = entries[Linear(ic.cell, grid)];
    std::optional<ByteView> bytes;
    if (!e.missing()) bytes = value->subspan(e.offset, e.nbytes);
    CAIRN_RETURN_IF_ERROR(DeliverInner(p, ic, bytes));
  }
  return Status::OK();
}

}  // namespace cairn::engine
