#include "cairn/codec/gzip_codec.h"

#include <gtest/gtest.h>

#include "cairn/codec/codec_test_util.h"
#include "cairn/util/coding.h"

namespace cairn {
namespace {

using codec_test::FromHex;
using codec_test::ParseOrDie;
using codec_test::RandomBytes;
using Format = DeflateCodec::Format;

Buffer Arange16() {
  Buffer b(32);
  for (int i = 0; i < 16; ++i) StoreLE16(b.data() + 2 * i, static_cast<uint16_t>(i));
  return b;
}

// Written by TensorStore 0.1.86 for uint16 arange(16): zarr3 gzip level 6,
// and zarr2 compressor {"id":"zlib","level":1}.
constexpr std::string_view kTensorStoreGzip6 =
    "1f8b080000000000000305c105010020000020ecd6ff6f058228c98aaae98669d98eebf9bd4130d020000000";
constexpr std::string_view kTensorStoreZlib1 =
    "780105c105010020000020ecd6ff6f058228c98aaae98669d98eebf905700079";

TEST(DeflateCodec, MatchesTensorStoreBytes) {
  DeflateCodec gzip(Format::kGzip, 6);
  auto dec = gzip.Decode(FromHex(kTensorStoreGzip6), 32);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(*dec, Arange16());
  auto enc = gzip.Encode(Arange16());
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(*enc, FromHex(kTensorStoreGzip6));

  DeflateCodec zlib(Format::kZlib, 1);
  auto zdec = zlib.Decode(FromHex(kTensorStoreZlib1), 32);
  ASSERT_TRUE(zdec.ok()) << zdec.status().ToString();
  EXPECT_EQ(*zdec, Arange16());
  auto zenc = zlib.Encode(Arange16());
  ASSERT_TRUE(zenc.ok());
  EXPECT_EQ(*zenc, FromHex(kTensorStoreZlib1));
}

TEST(DeflateCodec, RoundTrip) {
  for (Format f : {Format::kGzip, Format::kZlib}) {
    for (int level : {0, 1, 6, 9}) {
      DeflateCodec codec(f, level);
      for (size_t n : {0, 1, 1000, 300000}) {
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

TEST(DeflateCodec, FormatsAreNotInterchangeable) {
  Buffer in = RandomBytes(100, 1, true);
  auto gz = DeflateCodec(Format::kGzip, 5).Encode(in);
  ASSERT_TRUE(gz.ok());
  EXPECT_EQ(DeflateCodec(Format::kZlib, 5).Decode(*gz).status().code(), StatusCode::kDataLoss);
  auto zl = DeflateCodec(Format::kZlib, 5).Encode(in);
  ASSERT_TRUE(zl.ok());
  EXPECT_EQ(DeflateCodec(Format::kGzip, 5).Decode(*zl).status().code(), StatusCode::kDataLoss);
}

TEST(DeflateCodec, Json) {
  Json config = {{"level", 6}};
  auto codec = DeflateCodec::GzipFromJson(&config);
  ASSERT_TRUE(codec.ok());
  EXPECT_EQ((*codec)->ToJson(), ParseOrDie(R"({"configuration":{"level":6},"name":"gzip"})"));
  for (const char* text : {R"({})", R"({"level":10})", R"({"level":-1})", R"({"level":"1"})",
                           R"({"level":1,"x":2})"}) {
    Json bad = ParseOrDie(text);
    EXPECT_EQ(DeflateCodec::GzipFromJson(&bad).status().code(), StatusCode::kInvalidArgument)
        << text;
  }
  EXPECT_EQ(DeflateCodec::GzipFromJson(nullptr).status().code(), StatusCode::kInvalidArgument);
}

TEST(DeflateCodec, EveryTruncationIsDataLoss) {
  for (Format f : {Format::kGzip, Format::kZlib}) {
    DeflateCodec codec(f, 6);
    Buffer in = RandomBytes(300, 2, true);
    auto enc = codec.Encode(in);
    ASSERT_TRUE(enc.ok());
    for (size_t cut = 0; cut < enc->size(); ++cut) {
      EXPECT_EQ(codec.Decode(enc->view().first(cut), 300).status().code(),
                StatusCode::kDataLoss)
          << "cut " << cut;
    }
  }
}

TEST(DeflateCodec, FlippedBytesNeverCrash) {
  for (Format f : {Format::kGzip, Format::kZlib}) {
    DeflateCodec codec(f, 6);
    Buffer in = RandomBytes(400, 3, true);
    auto enc = codec.Encode(in);
    ASSERT_TRUE(enc.ok());
    int detected = 0;
    for (size_t i = 0; i < enc->size(); ++i) {
      Buffer bad = Buffer::CopyOf(enc->view());
      bad.data()[i] ^= 0xa5;
      auto dec = codec.Decode(bad, 400);
      if (!dec.ok()) {
        EXPECT_EQ(dec.status().code(), StatusCode::kDataLoss);
        ++detected;
      }
    }
    EXPECT_GT(detected, static_cast<int>(enc->size()) / 2);
  }
}

TEST(DeflateCodec, BoundAndTrailingBytes) {
  DeflateCodec codec(Format::kGzip, 9);
  Buffer zeros(1 << 20);
  std::memset(zeros.data(), 0, zeros.size());
  auto enc = codec.Encode(zeros);
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(codec.Decode(*enc, 1000).status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(codec.Decode(*enc, zeros.size()).ok());
  enc->append(std::string_view("junk"));
  EXPECT_EQ(codec.Decode(*enc).status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace cairn
