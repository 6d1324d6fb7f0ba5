#include "cairn/codec/zstd_codec.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>

#include <gtest/gtest.h>

#include "cairn/codec/codec_test_util.h"
#include "cairn/util/coding.h"
#include "cairn/util/xxhash64.h"

namespace cairn {
namespace {

using codec_test::FromHex;
using codec_test::ParseOrDie;
using codec_test::RandomBytes;

// uint16 0..15 little-endian.
Buffer Arange16() {
  Buffer b(32);
  for (int i = 0; i < 16; ++i) StoreLE16(b.data() + 2 * i, static_cast<uint16_t>(i));
  return b;
}

// Written by TensorStore 0.1.86: zarr3 uint16 [4,4] = arange(16), codecs
// bytes(little) + zstd{level 3, checksum true}.
constexpr std::string_view kTensorStoreFrame =
    "28b52ffd242001010000000100020003000400050006000700080009000a000b000c000d000e000f009ad392f9";

TEST(ZstdCodec, DecodesTensorStoreFrame) {
  ZstdCodec codec(3, true);
  Buffer frame = FromHex(kTensorStoreFrame);
  auto dec = codec.Decode(frame, 32);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(*dec, Arange16());
  auto enc = codec.Encode(Arange16());
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(*enc, frame);  // same library, same parameters: same bytes
}

TEST(ZstdCodec, RoundTrip) {
  for (int level : {-5, 1, 3, 9}) {
    for (bool checksum : {false, true}) {
      ZstdCodec codec(level, checksum);
      for (size_t n : {0, 1, 100, 70000, 1 << 20}) {
        for (bool runs : {false, true}) {
          Buffer in = RandomBytes(n, static_cast<uint32_t>(n + level), runs);
          auto enc = codec.Encode(in);
          ASSERT_TRUE(enc.ok());
          EXPECT_LE(enc->size(), codec.MaxEncodedSize(n));
          auto dec = codec.Decode(*enc, n);
          ASSERT_TRUE(dec.ok()) << dec.status().ToString();
          EXPECT_EQ(*dec, in);
        }
      }
    }
  }
}

TEST(ZstdCodec, JsonAsTensorStoreWritesIt) {
  Json config = {{"level", 5}, {"checksum", true}};
  auto codec = ZstdCodec::FromJson(&config);
  ASSERT_TRUE(codec.ok());
  EXPECT_EQ((*codec)->ToJson(),
            ParseOrDie(R"({"configuration":{"checksum":true,"level":5},"name":"zstd"})"));
  Json level_only = {{"level", 3}};
  auto c2 = ZstdCodec::FromJson(&level_only);
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ((*c2)->ToJson(),
            ParseOrDie(R"({"configuration":{"checksum":false,"level":3},"name":"zstd"})"));
}

TEST(ZstdCodec, RejectsBadConfiguration) {
  for (const char* text : {R"({})", R"({"checksum":false})", R"({"level":"3"})",
                           R"({"level":1000})", R"({"level":3,"checksum":1})",
                           R"({"level":3,"foo":1})"}) {
    Json config = ParseOrDie(text);
    EXPECT_EQ(ZstdCodec::FromJson(&config).status().code(), StatusCode::kInvalidArgument)
        << text;
  }
  EXPECT_EQ(ZstdCodec::FromJson(nullptr).status().code(), StatusCode::kInvalidArgument);
}

TEST(ZstdCodec, EveryTruncationIsDataLoss) {
  for (bool checksum : {false, true}) {
    ZstdCodec codec(3, checksum);
    Buffer in = RandomBytes(300, 5, /*runs=*/true);
    auto enc = codec.Encode(in);
    ASSERT_TRUE(enc.ok());
    for (size_t cut = 0; cut < enc->size(); ++cut) {
      auto dec = codec.Decode(enc->view().first(cut), 300);
      EXPECT_EQ(dec.status().code(), StatusCode::kDataLoss) << "cut " << cut;
    }
  }
}

TEST(ZstdCodec, FlippedBytesNeverCrash) {
  ZstdCodec codec(3, true);
  Buffer in = RandomBytes(500, 6, /*runs=*/true);
  auto enc = codec.Encode(in);
  ASSERT_TRUE(enc.ok());
  int detected = 0;
  for (size_t i = 0; i < enc->size(); ++i) {
    Buffer bad = Buffer::CopyOf(enc->view());
    bad.data()[i] ^= 0x5a;
    auto dec = codec.Decode(bad, 500);
    if (!dec.ok()) {
      EXPECT_EQ(dec.status().code(), StatusCode::kDataLoss);
      ++detected;
    } else {
      EXPECT_LE(dec->size(), 500u);
    }
  }
  EXPECT_GT(detected, static_cast<int>(enc->size()) / 2);
}

TEST(ZstdCodec, TrailingBytesAreDataLoss) {
  ZstdCodec codec(3, false);
  auto enc = codec.Encode(RandomBytes(100, 1));
  ASSERT_TRUE(enc.ok());
  enc->append(std::string_view("xyz"));
  EXPECT_EQ(codec.Decode(*enc, 100).status().code(), StatusCode::kDataLoss);
}

// A frame header declaring `content_size` bytes, followed by one raw block
// holding 4 bytes.
Buffer FrameDeclaring(uint64_t content_size) {
  Buffer b(4 + 1 + 8);
  StoreLE32(b.data(), 0xFD2FB528u);
  b.data()[4] = 0xE0;  // 8-byte content size, single segment
  StoreLE64(b.data() + 5, content_size);
  const uint8_t block[] = {0x21, 0x00, 0x00, 'a', 'b', 'c', 'd'};  // last raw block, 4 bytes
  b.append(ByteView(block, sizeof(block)));
  return b;
}

TEST(ZstdCodec, HugeDeclaredContentSizeIsRejectedBeforeAllocating) {
  ZstdCodec codec(3, false);
  EXPECT_EQ(codec.Decode(FrameDeclaring(uint64_t{1} << 60)).status().code(),
            StatusCode::kDataLoss);
  EXPECT_EQ(codec.Decode(FrameDeclaring(1 << 20), 1000).status().code(), StatusCode::kDataLoss);
  // Below the bound but implausible for 20 bytes of input: decoded in bounded
  // steps, and the short frame is found out.
  EXPECT_EQ(codec.Decode(FrameDeclaring(uint64_t{1} << 33)).status().code(),
            StatusCode::kDataLoss);
  // The honest frame decodes.
  auto ok = codec.Decode(FrameDeclaring(4), 4);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->as_string_view(), "abcd");
}

TEST(ZstdCodec, OutputBoundAppliesWithoutDeclaredSize) {
  // A highly compressible frame without a content size: the streaming path
  // must stop at the bound.
  Buffer zeros(4 << 20);
  std::memset(zeros.data(), 0, zeros.size());
  ZSTD_CCtx* cctx = ZSTD_createCCtx();
  ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 0);
  Buffer frame(ZSTD_compressBound(zeros.size()));
  ZSTD_outBuffer out = {frame.data(), frame.size(), 0};
  ZSTD_inBuffer in = {zeros.data(), zeros.size(), 0};
  ASSERT_EQ(ZSTD_compressStream2(cctx, &out, &in, ZSTD_e_end), 0u);
  ZSTD_freeCCtx(cctx);
  frame.resize(out.pos);
  ASSERT_EQ(ZSTD_getFrameContentSize(frame.data(), frame.size()), ZSTD_CONTENTSIZE_UNKNOWN);
  ZstdCodec codec(3, false);
  EXPECT_EQ(codec.Decode(frame, 1 << 20).status().code(), StatusCode::kDataLoss);
  auto dec = codec.Decode(frame, zeros.size());
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(*dec, zeros);
}

// DecodeInto takes only a frame of exactly the output's size: a frame
// declaring more or fewer bytes, or yielding fewer than it declares, is
// DataLoss, never a write past the output.
TEST(ZstdCodec, DecodeIntoTakesOnlyTheExpectedSize) {
  ZstdCodec codec(3, true);
  Buffer in = RandomBytes(1000, 8, /*runs=*/true);
  auto enc = codec.Encode(in);
  ASSERT_TRUE(enc.ok());
  Buffer out(1000);
  ASSERT_TRUE(codec.DecodeInto(*enc, out.mutable_view()).ok());
  EXPECT_EQ(out, in);
  for (size_t size : {999u, 1001u, 0u}) {
    Buffer other(size);
    EXPECT_EQ(codec.DecodeInto(*enc, other.mutable_view()).code(), StatusCode::kDataLoss) << size;
  }
  // Declares 8 bytes, holds 4.
  Buffer eight(8);
  EXPECT_EQ(codec.DecodeInto(FrameDeclaring(8), eight.mutable_view()).code(), StatusCode::kDataLoss);
  Buffer four(4);
  EXPECT_EQ(codec.DecodeInto(FrameDeclaring(8), four.mutable_view()).code(), StatusCode::kDataLoss);
}

TEST(ZstdCodec, NotAFrameIsDataLoss) {
  ZstdCodec codec(3, false);
  EXPECT_EQ(codec.Decode(AsBytes("hello world")).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(codec.Decode(ByteView()).status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace cairn

namespace cairn {
namespace {

// XXH64 against libzstd's: a frame libzstd compressed with its content
// checksum carries the low 4 bytes of XXH64 of the content, for every
// length around the algorithm's 32-, 8- and 4-byte steps.
TEST(Xxh64, MatchesTheChecksumLibzstdWrites) {
  EXPECT_EQ(Xxh64(ByteView()), 0xEF46DB3751D8E999ULL);
  const Buffer data = codec_test::RandomBytes(300, 11);
  for (size_t n : {0, 1, 3, 4, 7, 8, 12, 31, 32, 33, 63, 64, 100, 255, 300}) {
    const ByteView content(data.data(), n);
    auto frame = ZstdCodec(3, /*checksum=*/true).Encode(content);
    ASSERT_TRUE(frame.ok());
    EXPECT_EQ(LoadLE32(frame->data() + frame->size() - 4), static_cast<uint32_t>(Xxh64(content))) << n;
  }
}

// A stored frame (compression "none" of zarr v2) is raw blocks with the
// content checksum: libzstd decodes it, and a flipped byte is refused.
TEST(ZstdCodec, StoredFramesAreRawBlocksWithTheirChecksum) {
  const ZstdCodec stored(1, /*checksum=*/false, /*stored=*/true);
  EXPECT_TRUE(stored.checksum());
  for (size_t n : {size_t{0}, size_t{5}, size_t{128 << 10}, size_t{(128 << 10) + 1}, size_t{700000}}) {
    const Buffer content = codec_test::RandomBytes(n, static_cast<uint32_t>(n + 1), /*runs=*/true);
    auto frame = stored.Encode(content.view());
    ASSERT_TRUE(frame.ok());
    EXPECT_EQ(frame->size(), 18 + 3 * std::max<size_t>(1, (n + (128 << 10) - 1) / (128 << 10)) + n) << n;
    EXPECT_EQ(ZSTD_getFrameContentSize(frame->data(), frame->size()), n);
    Buffer out(n + 1);
    const size_t got = ZSTD_decompress(out.data(), out.size(), frame->data(), frame->size());
    ASSERT_FALSE(ZSTD_isError(got)) << n << ": " << ZSTD_getErrorName(got);
    ASSERT_EQ(got, n);
    if (n == 0) continue;
    EXPECT_EQ(std::memcmp(out.data(), content.data(), n), 0);
    Buffer flipped = Buffer::CopyOf(frame->view());
    flipped.data()[14 + 3 + n / 2] ^= 0x01;  // inside the first block's bytes (or the only one)
    Buffer into(n);
    const Status s = stored.DecodeInto(flipped.view(), into.mutable_view());
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << n << ": " << s.ToString();
  }
}

}  // namespace
}  // namespace cairn
