// A check shared by the object-store drivers' tests (s3, gcs): GetInto (the
// whole-chunk read of a restore) has the HTTP client write the object
// straight into the caller's memory: one request, no Buffer of the value's
// size (before, it was Get into a buffer of the whole value plus a copy).
// An error answer (a 404's body) never lands in the destination, and a
// destination of another size than the value is DataLoss naming the key.
// Control: Get of the same key does buffer the whole value.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "cairn/kvstore/kvstore.h"
#include "cairn/util/buffer.h"

namespace cairn::testing {

// `s` is an empty store; `calls` counts the requests it sent so far.
inline void ExpectGetIntoWritesTheObjectInPlace(KvStore& s, const std::function<uint64_t()>& calls) {
  constexpr size_t kSize = (3 << 20) + 17;
  std::vector<uint8_t> value(kSize);
  std::mt19937 rng(5);
  for (uint8_t& b : value) b = static_cast<uint8_t>(rng());
  ASSERT_TRUE(s.Put("chunk/0", ByteView(value.data(), value.size())).ok());

  std::vector<uint8_t> dst(kSize, 0xAA);
  const uint64_t allocated = Buffer::TotalBytesAllocated();
  const uint64_t before = calls();
  auto got = s.GetInto("chunk/0", MutableByteView(dst.data(), dst.size()));
  const uint64_t buffered = Buffer::TotalBytesAllocated() - allocated;
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(*got);
  EXPECT_TRUE(dst == value);
  EXPECT_EQ(calls() - before, 1u);
  EXPECT_LT(buffered, uint64_t{64} << 10) << "the value went through a buffer";

  // A missing key: false, and the 404's body stays out of the destination.
  std::vector<uint8_t> untouched(64, 0x3F);
  auto missing = s.GetInto("chunk/none", MutableByteView(untouched.data(), untouched.size()));
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  EXPECT_FALSE(*missing);
  EXPECT_EQ(std::count(untouched.begin(), untouched.end(), 0x3F), 64);

  // Destinations too small (the transfer is cut) and too large.
  for (size_t size : {kSize - 1, kSize + 1, size_t{1}}) {
    std::vector<uint8_t> other(size);
    auto wrong = s.GetInto("chunk/0", MutableByteView(other.data(), other.size()));
    EXPECT_EQ(wrong.status().code(), StatusCode::kDataLoss) << size << ": " << wrong.status().ToString();
    EXPECT_NE(wrong.status().message().find("chunk/0"), std::string_view::npos)
        << wrong.status().ToString();
  }
  // Control: Get buffers the whole value.
  const uint64_t before_get = Buffer::TotalBytesAllocated();
  auto whole = s.Get("chunk/0");
  ASSERT_TRUE(whole.ok() && whole->has_value());
  EXPECT_GE(Buffer::TotalBytesAllocated() - before_get, kSize);
}

}  // namespace cairn::testing
