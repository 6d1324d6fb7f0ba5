#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <numeric>

#include "cairn/util/box.h"
#include "cairn/util/buffer.h"
#include "cairn/util/coding.h"
#include "cairn/util/crc32c.h"
#include "cairn/util/json.h"
#include "cairn/result.h"
#include "cairn/status.h"
#include "cairn/util/thread_pool.h"

namespace cairn {
namespace {

TEST(Status, OkAndErrors) {
  Status ok;
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.ToString(), "OK");
  Status e = DataLossError("crc32c mismatch");
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.code(), StatusCode::kDataLoss);
  EXPECT_EQ(e.Annotate("reading key `a`").ToString(), "DataLoss: reading key `a`: crc32c mismatch");
  Status copy = e;
  EXPECT_EQ(copy.message(), "crc32c mismatch");
  // The same place named twice (a driver's error, then its caller's) reads once.
  Status named = e.Annotate("reading key `a`");
  EXPECT_EQ(named.Annotate("reading key `a`").message(), "reading key `a`: crc32c mismatch");
  EXPECT_EQ(named.Annotate("reading key").message(), "reading key: reading key `a`: crc32c mismatch");
  EXPECT_EQ(named.Annotate("decoding").message(), "decoding: reading key `a`: crc32c mismatch");
}

TEST(Status, ErrnoErrorKeepsItsErrnoThroughAnnotateAndCopies) {
  Status e = ErrnoError(EACCES, "creating directory /ro/x");
  EXPECT_EQ(e.error_number(), EACCES);
  EXPECT_EQ(e.Annotate("saving to /ro").error_number(), EACCES);
  Status copy = e.Annotate("a").Annotate("b");
  EXPECT_EQ(copy.error_number(), EACCES);
  EXPECT_EQ(DataLossError("x").error_number(), 0);
  EXPECT_EQ(Status().WithErrorNumber(EIO).ok(), true);
}

Result<int> Half(int x) {
  if (x % 2) return InvalidArgumentError("odd");
  return x / 2;
}
Result<int> Quarter(int x) {
  CAIRN_ASSIGN_OR_RETURN(int h, Half(x));
  return Half(h);
}

TEST(Result, ValueAndError) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_EQ(Quarter(6).status().code(), StatusCode::kInvalidArgument);
  Result<int> bad(Status::OK());
  EXPECT_EQ(bad.status().code(), StatusCode::kInternal);
}

TEST(Crc32c, KnownVectors) {
  EXPECT_EQ(Crc32c(AsBytes("123456789")), 0xE3069283u);
  EXPECT_EQ(Crc32c(AsBytes("")), 0u);
  EXPECT_EQ(Crc32cExtend(Crc32c(AsBytes("1234")), AsBytes("56789")), 0xE3069283u);
  std::vector<uint8_t> zeros(32, 0);
  EXPECT_EQ(Crc32c(zeros), 0x8A9136AAu);  // RFC 3720 B.4
}

TEST(Coding, VarintRoundTripAndLimits) {
  for (uint64_t v : {0ull, 1ull, 127ull, 128ull, 300ull, 1ull << 35, ~0ull}) {
    Buffer b;
    AppendVarint64(&b, v);
    EXPECT_EQ(static_cast<int>(b.size()), Varint64Length(v));
    ByteReader r(b);
    uint64_t got;
    ASSERT_TRUE(r.ReadVarint64(&got));
    EXPECT_EQ(got, v);
    EXPECT_TRUE(r.empty());
  }
  // 11 continuation bytes: too long.
  std::vector<uint8_t> too_long(11, 0x80);
  too_long.back() = 0;
  uint64_t v;
  EXPECT_FALSE(ByteReader(too_long).ReadVarint64(&v));
  // Overflowing 10th byte.
  std::vector<uint8_t> overflow(10, 0xff);
  overflow.back() = 0x02;
  EXPECT_FALSE(ByteReader(overflow).ReadVarint64(&v));
  // Truncated.
  std::vector<uint8_t> trunc = {0x80, 0x80};
  EXPECT_FALSE(ByteReader(trunc).ReadVarint64(&v));
  std::vector<uint8_t> le = {1, 2, 3, 4, 5, 6, 7, 8};
  ByteReader r(le);
  uint64_t x;
  ASSERT_TRUE(r.ReadLE64(&x));
  EXPECT_EQ(x, 0x0807060504030201ull);
  EXPECT_FALSE(r.ReadByte(nullptr));
}

TEST(Box, IntersectAndContains) {
  Box a({0, 0}, {10, 10});
  Box b({5, 8}, {10, 10});
  Box c = Intersect(a, b);
  EXPECT_EQ(c, Box({5, 8}, {5, 2}));
  EXPECT_TRUE(a.Contains(c));
  EXPECT_FALSE(a.Contains(b));
  EXPECT_TRUE(Intersect(a, Box({20, 0}, {1, 1})).empty());
  EXPECT_EQ(Box::FromShape({}).num_elements(), 1);
  EXPECT_FALSE(CheckedNumElements(std::vector<Index>{1ll << 40, 1ll << 40}).has_value());
}

TEST(StridedCopy, BoxIntersectionMatchesNaive) {
  // src covers [2,7) x [1,9) x [0,3); dst covers [0,5) x [0,5) x [1,4).
  Box sbox({2, 1, 0}, {5, 8, 3}), dbox({0, 0, 1}, {5, 5, 3});
  std::vector<int32_t> src(5 * 8 * 3), dst(5 * 5 * 3, -1);
  std::iota(src.begin(), src.end(), 0);
  CopyBoxIntersection(src.data(), sbox, dst.data(), dbox, 4);
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 5; ++j)
      for (int k = 0; k < 3; ++k) {
        int gi = i, gj = j, gk = k + 1;
        bool inside = gi >= 2 && gi < 7 && gj >= 1 && gj < 9 && gk >= 0 && gk < 3;
        int want = inside ? src[((gi - 2) * 8 + (gj - 1)) * 3 + gk] : -1;
        EXPECT_EQ(dst[(i * 5 + j) * 3 + k], want) << i << "," << j << "," << k;
      }
}

TEST(StridedCopy, TransposeWithStrides) {
  std::vector<int16_t> src(6), dst(6);
  std::iota(src.begin(), src.end(), 0);  // 2x3 C order
  // Write dst as 3x2 C order = transpose.
  std::vector<Index> shape = {2, 3};
  std::vector<Index> ss = {6, 2}, ds = {2, 4};
  StridedCopy(src.data(), ss, dst.data(), ds, shape, 2);
  EXPECT_EQ(dst, (std::vector<int16_t>{0, 3, 1, 4, 2, 5}));
}

TEST(FillWithElement, Patterns) {
  std::vector<uint16_t> v(7);
  uint16_t e = 0x7fc0;
  FillWithElement(v.data(), v.size(), &e, 2);
  for (auto x : v) EXPECT_EQ(x, 0x7fc0);
}

TEST(ThreadPool, TaskGroupReportsFirstErrorAndNests) {
  ThreadPool pool(2);
  std::atomic<int> n{0};
  TaskGroup g(pool);
  for (int i = 0; i < 50; ++i) {
    g.Run([&, i]() -> Status {
      TaskGroup inner(pool);
      inner.Run([&] { ++n; return Status::OK(); });
      CAIRN_RETURN_IF_ERROR(inner.Wait());
      return i == 7 ? DataLossError("seven") : Status::OK();
    });
  }
  Status s = g.Wait();
  EXPECT_EQ(n.load(), 50);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
}

TEST(Buffer, LargeBlocksAreReusedAndAligned) {
  const uint8_t* first;
  {
    Buffer a(3 << 20);
    first = a.data();
    EXPECT_EQ(reinterpret_cast<uintptr_t>(a.data()) % Buffer::kAlignment, 0u);
    std::memset(a.data(), 7, a.size());
  }
  Buffer b((3 << 20) - 100);  // same rounded class: the freed block comes back
  EXPECT_EQ(b.data(), first);
  EXPECT_GE(b.capacity(), b.size());
  Buffer moved = std::move(b);
  EXPECT_EQ(b.data(), nullptr);
  EXPECT_EQ(moved.data(), first);
  moved.append(AsBytes("tail"));  // growth reallocates and keeps the bytes
  EXPECT_EQ(moved.size(), (3u << 20) - 100 + 4);
  EXPECT_EQ(moved.data()[0], 7);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(moved.data()) + moved.size() - 4, 4),
            "tail");
}

TEST(Buffer, RemovePrefixKeepsTheRestInPlace) {
  Buffer a = Buffer::CopyOf(std::string_view("0123456789"));
  const uint8_t* start = a.data();
  const size_t capacity = a.capacity();
  a.RemovePrefix(3);
  EXPECT_EQ(a.as_string_view(), "3456789");
  EXPECT_EQ(a.data(), start + 3);  // not moved
  EXPECT_EQ(a.capacity(), capacity - 3);
  a.resize(5);  // shrinking stays in place
  EXPECT_EQ(a.as_string_view(), "34567");
  EXPECT_EQ(a.data(), start + 3);
  Buffer moved = std::move(a);
  EXPECT_EQ(moved.as_string_view(), "34567");
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(a.data(), nullptr);
  moved.resize(moved.capacity() + 1);  // growing past the block moves to an aligned one
  EXPECT_EQ(std::string_view(reinterpret_cast<const char*>(moved.data()), 5), "34567");
  EXPECT_EQ(reinterpret_cast<uintptr_t>(moved.data()) % Buffer::kAlignment, 0u);
  moved.resize(5);
  moved.append(AsBytes("xy"));
  EXPECT_EQ(moved.as_string_view(), "34567xy");
}

TEST(Json, CheckedAccessNeverThrows) {
  auto bad = ParseJson("{not json", "zarr.json");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  auto j = ParseJson(R"({"a": "x", "b": [1, 2, -3], "c": 18446744073709551615})", "t");
  ASSERT_TRUE(j.ok());
  EXPECT_FALSE(GetIntField(*j, "a").ok());
  EXPECT_FALSE(GetIntField(*j, "missing").ok());
  EXPECT_FALSE(GetIntField(*j, "c").ok());
  EXPECT_EQ(*JsonToIntVector((*j)["b"], "b"), (std::vector<int64_t>{1, 2, -3}));
  EXPECT_FALSE(CheckOnlyMembers(*j, {"a", "b"}, "t").ok());
  EXPECT_EQ(DumpJson(Json::parse(R"({"b":0.0,"a":1})")), R"({"a":1,"b":0.0})");
}

}  // namespace
}  // namespace cairn
