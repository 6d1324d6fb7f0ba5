// Element-wise casts between dtypes, as numpy's `astype` does them for the
// casts converters need (fp32 -> bf16 for serving, bf16 -> fp32, ...).
//
// Float to float rounds to nearest even, keeps NaN a NaN and saturates or
// overflows to infinity as ml_dtypes does (EncodeFloat). Integer to integer
// and bool casts are not offered: a checkpoint converter that silently
// wraps integers would corrupt step counters.
//
// Thread safety: pure functions.
#pragma once

#include <cstddef>

#include "cairn/dtype/dtype.h"
#include "cairn/status.h"

namespace cairn {

// Whether CastElements supports `from` -> `to` (same dtype: always).
bool CanCast(DType from, DType to);

// Converts `n` native-endian elements. InvalidArgument naming both dtypes
// when !CanCast. REQUIRES: src and dst do not overlap unless from == to.
Status CastElements(DType from, const void* src, DType to, void* dst, size_t n);

}  // namespace cairn
