// VerifyConversion (convert.h): compares each destination chunk with the
// source, reading each stored chunk of both once where the budget holds a
// destination chunk's source and destination bytes together.
//
// A destination chunk is a whole number of source pieces (convert.cc fits
// it so), so comparing it whole decodes each source piece and the
// destination chunk once. A chunk that is one stored chunk on either side
// is taken as the reader decoded it (ReadWholeChunk), without a copy. The
// cast is compared in small pieces, so the chunk's cast bytes are never
// held. A chunk whose bytes exceed the budget is compared in whole source
// pieces; only a piece that alone exceeds it is compared in slabs, which
// decode the pieces they cross again.
#include <algorithm>
#include <cstring>
#include <optional>

#include "cairn/dtype/cast.h"
#include "cairn/engine/convert/convert.h"
#include "cairn/engine/convert/convert_memory.h"
#include "cairn/util/buffer.h"

namespace cairn::engine {
namespace {

// Elements cast at once when comparing across dtypes.
constexpr uint64_t kCompareElements = uint64_t{1} << 16;

Result<Buffer> TryAllocate(uint64_t bytes, std::string_view what) {
  return Buffer::TryAllocate(static_cast<size_t>(std::max<uint64_t>(bytes, 1)), what);
}

// `box` of `path` as the reader decoded it when it is one stored chunk,
// else read into a buffer of its own.
Result<Buffer> ReadForVerify(layout::CheckpointReader& reader, const std::string& path, const Box& box,
                             DType dtype, bool try_whole) {
  if (try_whole) {
    CAIRN_ASSIGN_OR_RETURN(std::optional<Buffer> whole, reader.ReadWholeChunk(path, box));
    if (whole) return std::move(*whole);
  }
  CAIRN_ASSIGN_OR_RETURN(Buffer out, TryAllocate(static_cast<uint64_t>(box.num_elements()) * DTypeSize(dtype),
                                                 "verifying array `" + path + "` box " + box.ToString()));
  CAIRN_RETURN_IF_ERROR(reader.ReadBox(path, box, out.data()));
  return out;
}

Status Differs(const ArrayMapping& m, const Box& box) {
  return Status(StatusCode::kDataLoss, "verify: array `" + m.dest.path + "` box " + box.ToString() +
                                           " differs from the source array `" + m.source.path + "`");
}

// Compares destination box `box` of `m` with the source.
Status VerifyBox(layout::CheckpointReader& source, layout::CheckpointReader& dest, const ArrayMapping& m,
                 const Box& box) {
  const uint64_t n = static_cast<uint64_t>(box.num_elements());
  CAIRN_ASSIGN_OR_RETURN(Buffer src, ReadForVerify(source, m.source.path, SourceBox(m, box), m.source.dtype,
                                                   m.source_axes.empty()));
  if (!m.source_axes.empty()) {
    CAIRN_ASSIGN_OR_RETURN(Buffer arranged, TryAllocate(n * DTypeSize(m.source.dtype),
                                                        "verifying array `" + m.dest.path + "`"));
    ArrangeAsDest(m, box, src.data(), arranged.data());
    src = std::move(arranged);
  }
  CAIRN_ASSIGN_OR_RETURN(Buffer got, ReadForVerify(dest, m.dest.path, box, m.dest.dtype, true));
  if (m.source.dtype == m.dest.dtype) {
    if (std::memcmp(src.data(), got.data(), n * DTypeSize(m.dest.dtype)) != 0) return Differs(m, box);
    return Status::OK();
  }
  const size_t in = DTypeSize(m.source.dtype), out = DTypeSize(m.dest.dtype);
  CAIRN_ASSIGN_OR_RETURN(Buffer want, TryAllocate(std::min(n, kCompareElements) * out,
                                                  "verifying array `" + m.dest.path + "`"));
  for (uint64_t done = 0; done < n; done += kCompareElements) {
    const uint64_t k = std::min(kCompareElements, n - done);
    CAIRN_RETURN_IF_ERROR(CastElements(m.source.dtype, src.data() + done * in, m.dest.dtype, want.data(), k));
    if (std::memcmp(want.data(), got.data() + done * out, k * out) != 0) return Differs(m, box);
  }
  return Status::OK();
}

// `chunk` cut into boxes of `shape` (clipped), aligned at its origin.
std::vector<Box> Tile(const Box& chunk, const Shape& shape) {
  std::vector<Box> boxes = ChunkBoxes(chunk.shape, shape);
  for (Box& b : boxes) {
    for (size_t d = 0; d < b.rank(); ++d) b.origin[d] += chunk.origin[d];
  }
  return boxes;
}

}  // namespace

Status VerifyConversion(layout::CheckpointReader& source, layout::CheckpointReader& dest,
                        const std::vector<ArrayMapping>& plan, uint64_t memory_budget,
                        const Interrupt* interrupt) {
  for (const ArrayMapping& m : plan) {
    const layout::ArrayInfo* d = layout::FindArray(dest.arrays(), m.dest.path);
    if (d == nullptr) {
      return Status(StatusCode::kDataLoss, "verify: array `" + m.dest.path +
                                               "` is missing from the destination");
    }
    if (d->dtype != m.dest.dtype || d->shape != m.dest.shape) {
      return Status(StatusCode::kDataLoss,
                    "verify: array `" + m.dest.path + "` is " + std::string(DTypeName(d->dtype)) +
                        " " + Box::FromShape(d->shape).ToString() + " in the destination, not " +
                        std::string(DTypeName(m.dest.dtype)) + " " +
                        Box::FromShape(m.dest.shape).ToString());
    }
    // Per element of a box compared: its source bytes (and, transposed,
    // their rearranged copy) and its destination bytes.
    const uint64_t per_element =
        DTypeSize(m.source.dtype) * (m.source_axes.empty() ? 1 : 2) + DTypeSize(m.dest.dtype);
    // Slabs of a chunk over the budget leave room for both readers' codec
    // memory (convert_memory.h).
    const uint64_t codecs = CodecBytes(source.format(), m.source) + CodecBytes(dest.format(), *d);
    const uint64_t max_slab = std::max<uint64_t>(memory_budget > codecs ? memory_budget - codecs : 0, 4096);
    auto fits = [&](const Box& b) { return static_cast<uint64_t>(b.num_elements()) * per_element <= memory_budget; };
    for (const Box& chunk : ChunkBoxes(m.dest.shape, m.dest.write_shape)) {
      // A chunk over the budget (a safetensors array is one chunk) in
      // whole source pieces, each compared once.
      const std::vector<Box> parts =
          fits(chunk) ? std::vector<Box>{chunk}
                      : Tile(chunk, FitChunkShapeInUnits(chunk.shape, SourceReadShapeInDest(m), per_element,
                                                         memory_budget));
      for (const Box& part : parts) {
        for (const Box& box : fits(part) ? std::vector<Box>{part} : SplitIntoSlabs(part, per_element, max_slab)) {
          CAIRN_RETURN_IF_ERROR(CheckInterrupt(interrupt, "verifying the conversion"));
          CAIRN_RETURN_IF_ERROR(VerifyBox(source, dest, m, box));
        }
      }
    }
  }
  return Status::OK();
}

}  // namespace cairn::engine
