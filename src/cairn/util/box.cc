#include "cairn/util/box.h"

#include <algorithm>
#include <cstring>

namespace cairn {

Index Box::num_elements() const { return NumElements(shape); }

bool Box::Contains(const Box& inner) const {
  for (size_t i = 0; i < rank(); ++i) {
    if (inner.shape[i] == 0) continue;
    if (inner.origin[i] < origin[i] || inner.origin[i] + inner.shape[i] > origin[i] + shape[i])
      return false;
  }
  return true;
}

std::string Box::ToString() const {
  std::string s = "[";
  for (size_t i = 0; i < rank(); ++i) {
    if (i) s += ", ";
    s += std::to_string(origin[i]) + ":" + std::to_string(origin[i] + shape[i]);
  }
  return s + "]";
}

Box Intersect(const Box& a, const Box& b) {
  Box r;
  r.origin.resize(a.rank());
  r.shape.resize(a.rank());
  for (size_t i = 0; i < a.rank(); ++i) {
    Index lo = std::max(a.origin[i], b.origin[i]);
    Index hi = std::min(a.origin[i] + a.shape[i], b.origin[i] + b.shape[i]);
    r.origin[i] = lo;
    r.shape[i] = hi > lo ? hi - lo : 0;
  }
  return r;
}

std::optional<Index> CheckedNumElements(std::span<const Index> shape) {
  Index n = 1;
  for (Index d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > INT64_MAX / d) return std::nullopt;
    n *= d;
  }
  return n;
}

Index NumElements(std::span<const Index> shape) {
  Index n = 1;
  for (Index d : shape) n *= d;
  return n;
}

std::vector<Index> CStrides(std::span<const Index> shape, size_t elem_size) {
  std::vector<Index> s(shape.size());
  Index stride = static_cast<Index>(elem_size);
  for (size_t i = shape.size(); i-- > 0;) {
    s[i] = stride;
    stride *= shape[i];
  }
  return s;
}

std::vector<Index> FStrides(std::span<const Index> shape, size_t elem_size) {
  std::vector<Index> s(shape.size());
  Index stride = static_cast<Index>(elem_size);
  for (size_t i = 0; i < shape.size(); ++i) {
    s[i] = stride;
    stride *= shape[i];
  }
  return s;
}

namespace {

// After merging, dimension k of the copy has extent shape[k] and strides
// src[k]/dst[k]; the last dimension may be a contiguous run of bytes.
struct Plan {
  std::vector<Index> shape, src, dst;
  size_t run_bytes;  // bytes per innermost memcpy (elem_size if not contiguous)
};

Plan MakePlan(std::span<const Index> src_s, std::span<const Index> dst_s,
              std::span<const Index> shape, size_t elem_size) {
  Plan p;
  // Drop extent-1 dimensions, then merge adjacent dims that are contiguous in both.
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    if (!p.shape.empty() && p.src.back() == src_s[i] * shape[i] &&
        p.dst.back() == dst_s[i] * shape[i]) {
      p.shape.back() *= shape[i];
      p.src.back() = src_s[i];
      p.dst.back() = dst_s[i];
      continue;
    }
    p.shape.push_back(shape[i]);
    p.src.push_back(src_s[i]);
    p.dst.push_back(dst_s[i]);
  }
  p.run_bytes = elem_size;
  const Index es = static_cast<Index>(elem_size);
  if (!p.shape.empty() && p.src.back() == es && p.dst.back() == es) {
    p.run_bytes = elem_size * static_cast<size_t>(p.shape.back());
    p.shape.pop_back();
    p.src.pop_back();
    p.dst.pop_back();
  }
  return p;
}

void CopyElement(const char* s, char* d, size_t n) {
  switch (n) {
    case 1: *d = *s; break;
    case 2: std::memcpy(d, s, 2); break;
    case 4: std::memcpy(d, s, 4); break;
    case 8: std::memcpy(d, s, 8); break;
    default: std::memcpy(d, s, n);
  }
}

}  // namespace

void StridedCopy(const void* src, std::span<const Index> src_byte_strides, void* dst,
                 std::span<const Index> dst_byte_strides, std::span<const Index> shape,
                 size_t elem_size) {
  for (Index d : shape) {
    if (d == 0) return;
  }
  Plan p = MakePlan(src_byte_strides, dst_byte_strides, shape, elem_size);
  const size_t rank = p.shape.size();
  if (rank == 0) {
    std::memcpy(dst, src, p.run_bytes);
    return;
  }
  std::vector<Index> idx(rank, 0);
  const char* s = static_cast<const char*>(src);
  char* d = static_cast<char*>(dst);
  const Index inner = p.shape[rank - 1];
  const Index ss = p.src[rank - 1], ds = p.dst[rank - 1];
  for (;;) {
    const char* sp = s;
    char* dp = d;
    for (Index i = 0; i < inner; ++i, sp += ss, dp += ds) CopyElement(sp, dp, p.run_bytes);
    // Advance the outer index (all but the innermost dimension).
    size_t k = rank - 1;
    for (;;) {
      if (k == 0) return;
      --k;
      if (++idx[k] < p.shape[k]) {
        s += p.src[k];
        d += p.dst[k];
        break;
      }
      s -= p.src[k] * (p.shape[k] - 1);
      d -= p.dst[k] * (p.shape[k] - 1);
      idx[k] = 0;
    }
  }
}

void CopyBoxIntersection(const void* src, const Box& src_box, void* dst, const Box& dst_box,
                         size_t elem_size) {
  Box common = Intersect(src_box, dst_box);
  if (common.empty()) return;
  auto ss = CStrides(src_box.shape, elem_size);
  auto ds = CStrides(dst_box.shape, elem_size);
  Index soff = 0, doff = 0;
  for (size_t i = 0; i < common.rank(); ++i) {
    soff += (common.origin[i] - src_box.origin[i]) * ss[i];
    doff += (common.origin[i] - dst_box.origin[i]) * ds[i];
  }
  StridedCopy(static_cast<const char*>(src) + soff, ss, static_cast<char*>(dst) + doff, ds,
              common.shape, elem_size);
}

void FillWithElement(void* dst, size_t num_elements, const void* elem, size_t elem_size) {
  char* d = static_cast<char*>(dst);
  if (num_elements == 0) return;
  const char* e = static_cast<const char*>(elem);
  bool all_same = true;
  for (size_t i = 1; i < elem_size; ++i) all_same &= e[i] == e[0];
  if (all_same) {
    std::memset(d, e[0], num_elements * elem_size);
    return;
  }
  std::memcpy(d, elem, elem_size);
  // Doubling copies.
  size_t filled = 1;
  while (filled < num_elements) {
    size_t n = std::min(filled, num_elements - filled);
    std::memcpy(d + filled * elem_size, d, n * elem_size);
    filled += n;
  }
}

}  // namespace cairn
