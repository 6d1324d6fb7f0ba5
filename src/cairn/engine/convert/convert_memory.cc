#include "cairn/engine/convert/convert_memory.h"

#include <algorithm>
#include <mutex>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "cairn/util/buffer.h"
#include "cairn/util/buffer_cache.h"

namespace cairn::engine {

uint64_t BlockCacheShare(uint64_t budget) { return budget / 4; }

uint64_t SlabShare(uint64_t budget) { return budget - BlockCacheShare(budget); }

uint64_t CacheShareBeside(uint64_t budget, uint64_t in_flight) {
  return budget - std::min(in_flight, SlabShare(budget));
}

uint64_t SlabBytesPerElement(const ArrayMapping& m) {
  uint64_t n = DTypeSize(m.source.dtype);
  if (!m.source_axes.empty()) n += DTypeSize(m.source.dtype);  // the transposed copy
  if (m.dest.dtype != m.source.dtype) n += DTypeSize(m.dest.dtype);
  return n;
}

uint64_t CodecBytes(std::string_view format, const layout::ArrayInfo& a) {
  if (format == "safetensors") return 0;
  const Shape& piece = a.read_shape.size() == a.shape.size() && !a.read_shape.empty()
                           ? a.read_shape
                           : a.write_shape;
  uint64_t chunk = DTypeSize(a.dtype);
  for (Index d : piece) chunk *= static_cast<uint64_t>(std::max<Index>(d, 1));
  return 2 * chunk + kCodecSlackBytes;
}

uint64_t ReadUnitElements(const layout::ArrayInfo& a) {
  if (a.read_shape.empty() || a.read_shape.size() != a.shape.size()) return 0;
  uint64_t n = 1;
  for (size_t d = 0; d < a.shape.size(); ++d) {
    n *= static_cast<uint64_t>(std::max<Index>(1, std::min(a.read_shape[d], a.shape[d])));
  }
  return n;
}

uint64_t MinimumBudget(const ArrayMapping& m) {
  const uint64_t transposed = m.source_axes.empty() ? 0 : DTypeSize(m.source.dtype);
  return ReadUnitElements(m.source) *
         (DTypeSize(m.source.dtype) + transposed + DTypeSize(m.dest.dtype));
}

Shape TransposedBand(const ArrayMapping& m, uint64_t slab_limit, uint64_t budget, uint64_t codecs) {
  if (m.source_axes.empty() || ReadUnitElements(m.source) == 0 || m.dest.shape.empty()) return {};
  const Shape unit_shape = SourceReadShapeInDest(m);
  const Index rows = m.dest.shape[0];
  if (rows <= 0) return {};
  const Index unit = std::max<Index>(1, std::min(unit_shape.empty() ? 1 : unit_shape[0], rows));
  uint64_t row_bytes = SlabBytesPerElement(m);
  for (size_t d = 1; d < m.dest.shape.size(); ++d) row_bytes *= static_cast<uint64_t>(std::max<Index>(m.dest.shape[d], 0));
  const uint64_t unit_bytes = row_bytes * static_cast<uint64_t>(unit);
  if (row_bytes == 0 || codecs >= budget || unit_bytes > budget - codecs) return {};
  const Index units = static_cast<Index>(std::max<uint64_t>(1, slab_limit / unit_bytes));
  Shape band = m.dest.shape;
  band[0] = std::min(rows, units * unit);
  return band;
}

namespace {
constexpr uint64_t kKiB = 1024, kMiB = kKiB << 10;
uint64_t BudgetUnit(uint64_t bytes) { return bytes >= kMiB ? kMiB : bytes >= kKiB ? kKiB : 1; }
}  // namespace

std::string SlowBudgetWarning(uint64_t budget, const ArrayMapping& m, const Shape& planned,
                              const Shape& fitted) {
  if (budget >= kRecommendedLeastBudget || fitted == planned) return "";
  uint64_t elements = 1;
  std::string shape = "[";
  for (size_t d = 0; d < fitted.size(); ++d) {
    elements *= static_cast<uint64_t>(std::max<Index>(1, fitted[d]));
    shape += (d ? ", " : "") + std::to_string(fitted[d]);
  }
  shape += "]";
  return "memory budget of " + FormatBudget(budget) + " cuts array `" + m.source.path +
         "` into chunks of " + shape + " (" + FormatBudget(elements * DTypeSize(m.dest.dtype)) +
         "): the conversion writes many small chunks slowly; a budget of " +
         FormatBudget(kRecommendedLeastBudget) + " or more is recommended (--memory-budget " +
         FormatBudget(kRecommendedLeastBudget) + ", memory_budget=" +
         std::to_string(kRecommendedLeastBudget) + ")";
}

uint64_t RoundUpBudget(uint64_t bytes) {
  const uint64_t unit = BudgetUnit(bytes);
  return (bytes + unit - 1) / unit * unit;
}

std::string FormatBudget(uint64_t bytes) {
  const uint64_t unit = BudgetUnit(bytes);
  const std::string n = std::to_string((bytes + unit - 1) / unit);
  return unit == kMiB ? n + "MiB" : unit == kKiB ? n + "KiB" : n + "B";
}

uint64_t SlabCharge(const ArrayMapping& m, uint64_t elements, std::string_view source_format,
                    std::string_view dest_format) {
  return elements * SlabBytesPerElement(m) + CodecBytes(source_format, m.source) +
         CodecBytes(dest_format, m.dest);
}

uint64_t StoredBound(uint64_t chunk_bytes) {
  return chunk_bytes + chunk_bytes / 128 + kCodecSlackBytes;
}

uint64_t WholeChunkCharge(const ArrayMapping& m, uint64_t elements, std::string_view dest_format) {
  const uint64_t chunk = elements * DTypeSize(m.source.dtype);
  const uint64_t writer =
      dest_format == "axlearn" ? StoredBound(chunk) : CodecBytes(dest_format, m.dest);
  return chunk + std::max(StoredBound(chunk), writer);
}

uint64_t FitShare(uint64_t budget) { return std::max<uint64_t>(SlabShare(budget) / 2, 4096); }

uint64_t FitBytesPerElement(const ArrayMapping& m) {
  return SlabBytesPerElement(m) + 2 * DTypeSize(m.dest.dtype);
}

void ReturnLargeBlocksToTheSystem() {
#if defined(__GLIBC__)
  static std::once_flag once;
  std::call_once(once, [] { mallopt(M_MMAP_THRESHOLD, 1 << 20); });
#endif
}

BlockCacheLimit::BlockCacheLimit(uint64_t budget) {
  ReturnLargeBlocksToTheSystem();
  const uint64_t share = BlockCacheShare(budget);
  previous_ = SetBufferBlockCacheLimit(share);
  if (previous_ < share) SetBufferBlockCacheLimit(previous_);
}

BlockCacheLimit::~BlockCacheLimit() { SetBufferBlockCacheLimit(previous_); }

}  // namespace cairn::engine
