#include "cairn/codec/blosc_codec.h"

#include <gtest/gtest.h>

#include "cairn/codec/codec_test_util.h"
#include "cairn/util/coding.h"

namespace cairn {
namespace {

using codec_test::FromHex;
using codec_test::MakeSpec;
using codec_test::ParseOrDie;
using codec_test::RandomBytes;
using Shuffle = BloscCodec::Shuffle;

Buffer Arange16() {
  Buffer b(32);
  for (int i = 0; i < 16; ++i) StoreLE16(b.data() + 2 * i, static_cast<uint16_t>(i));
  return b;
}

// Written by TensorStore 0.1.86: uint16 arange(16), blosc lz4 clevel 5
// shuffle typesize 2 (too small to compress: stored memcpy'd).
constexpr std::string_view kTensorStoreBlosc =
    "02013302200000002000000030000000"
    "000001000200030004000500060007000800090"
    "00a000b000c000d000e000f00";

TEST(BloscCodec, DecodesTensorStoreBuffer) {
  BloscCodec codec("lz4", 5, Shuffle::kShuffle, 2, 0);
  auto dec = codec.Decode(FromHex(kTensorStoreBlosc), 32);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(*dec, Arange16());
}

TEST(BloscCodec, RoundTrip) {
  for (const char* cname : {"blosclz", "lz4", "lz4hc", "zlib", "zstd"}) {
    for (Shuffle s : {Shuffle::kNoShuffle, Shuffle::kShuffle, Shuffle::kBitShuffle}) {
      for (int typesize : {1, 2, 4, 8}) {
        BloscCodec codec(cname, 5, s, typesize, 0);
        for (size_t n : {0, 3, 1000, 200000}) {
          Buffer in = RandomBytes(n, static_cast<uint32_t>(n), /*runs=*/n % 2 == 0);
          auto enc = codec.Encode(in);
          ASSERT_TRUE(enc.ok()) << cname << " " << enc.status().ToString();
          EXPECT_LE(enc->size(), codec.MaxEncodedSize(n));
          auto dec = codec.Decode(*enc, n);
          ASSERT_TRUE(dec.ok()) << cname << " " << dec.status().ToString();
          EXPECT_EQ(*dec, in);
        }
      }
    }
  }
}

TEST(BloscCodec, BlocksizeIsHonored) {
  BloscCodec codec("lz4", 5, Shuffle::kShuffle, 4, 4096);
  Buffer in = RandomBytes(100000, 4, true);
  auto enc = codec.Encode(in);
  ASSERT_TRUE(enc.ok());
  auto automatic = BloscCodec("lz4", 5, Shuffle::kShuffle, 4, 0).Encode(in);
  ASSERT_TRUE(automatic.ok());
  // libblosc rounds a forced blocksize to its own limits, but it is used.
  EXPECT_NE(LoadLE32(enc->data() + 8), LoadLE32(automatic->data() + 8));
  auto dec = codec.Decode(*enc);
  ASSERT_TRUE(dec.ok());
  EXPECT_EQ(*dec, in);
}

TEST(BloscCodec, JsonAsTensorStoreWritesIt) {
  ChunkSpec f32 = MakeSpec(DType::kFloat32, {4, 4});
  Json config = ParseOrDie(
      R"({"blocksize":0,"clevel":5,"cname":"lz4","shuffle":"shuffle","typesize":4})");
  auto codec = BloscCodec::FromJson(&config, f32);
  ASSERT_TRUE(codec.ok()) << codec.status().ToString();
  EXPECT_EQ((*codec)->ToJson(), ParseOrDie(R"({"configuration":{"blocksize":0,"clevel":5,)"
                                           R"("cname":"lz4","shuffle":"shuffle","typesize":4},)"
                                           R"("name":"blosc"})"));
  // noshuffle: typesize may be absent and is not written.
  Json ns = ParseOrDie(R"({"blocksize":0,"clevel":3,"cname":"zstd","shuffle":"noshuffle"})");
  auto nsc = BloscCodec::FromJson(&ns, f32);
  ASSERT_TRUE(nsc.ok());
  EXPECT_EQ((*nsc)->ToJson(), ParseOrDie(R"({"configuration":{"blocksize":0,"clevel":3,)"
                                         R"("cname":"zstd","shuffle":"noshuffle"},)"
                                         R"("name":"blosc"})"));
}

TEST(BloscCodec, RejectsBadConfiguration) {
  ChunkSpec spec = MakeSpec(DType::kFloat32, {4});
  for (const char* text : {
           R"({"clevel":5,"cname":"lz4","shuffle":"shuffle","typesize":4})",
           R"({"blocksize":0,"cname":"lz4","shuffle":"shuffle","typesize":4})",
           R"({"blocksize":0,"clevel":5,"shuffle":"shuffle","typesize":4})",
           R"({"blocksize":0,"clevel":5,"cname":"lz4","typesize":4})",
           R"({"blocksize":0,"clevel":5,"cname":"lz4","shuffle":"shuffle"})",
           R"({"blocksize":0,"clevel":5,"cname":"lzma","shuffle":"shuffle","typesize":4})",
           R"({"blocksize":0,"clevel":10,"cname":"lz4","shuffle":"shuffle","typesize":4})",
           R"({"blocksize":0,"clevel":5,"cname":"lz4","shuffle":"yes","typesize":4})",
           R"({"blocksize":0,"clevel":5,"cname":"lz4","shuffle":"shuffle","typesize":0})",
           R"({"blocksize":-1,"clevel":5,"cname":"lz4","shuffle":"shuffle","typesize":4})",
           R"({"blocksize":0,"clevel":5,"cname":"lz4","shuffle":"shuffle","typesize":4,"x":1})",
       }) {
    Json config = ParseOrDie(text);
    EXPECT_EQ(BloscCodec::FromJson(&config, spec).status().code(),
              StatusCode::kInvalidArgument)
        << text;
  }
}

TEST(BloscCodec, HeaderLyingAboutSizesIsDataLoss) {
  BloscCodec codec("lz4", 5, Shuffle::kShuffle, 4, 0);
  Buffer in = RandomBytes(10000, 5, true);
  auto enc = codec.Encode(in);
  ASSERT_TRUE(enc.ok());
  {  // nbytes larger than the bound
    Buffer bad = Buffer::CopyOf(enc->view());
    StoreLE32(bad.data() + 4, 0x7fffffff);
    EXPECT_EQ(codec.Decode(bad, 10000).status().code(), StatusCode::kDataLoss);
    EXPECT_EQ(codec.Decode(bad).status().code(), StatusCode::kDataLoss);
  }
  {  // nbytes smaller than the data
    Buffer bad = Buffer::CopyOf(enc->view());
    StoreLE32(bad.data() + 4, 100);
    EXPECT_EQ(codec.Decode(bad, 10000).status().code(), StatusCode::kDataLoss);
  }
  {  // cbytes larger / smaller than the input
    Buffer bad = Buffer::CopyOf(enc->view());
    StoreLE32(bad.data() + 12, static_cast<uint32_t>(enc->size() + 100));
    EXPECT_EQ(codec.Decode(bad, 10000).status().code(), StatusCode::kDataLoss);
    StoreLE32(bad.data() + 12, 20);
    EXPECT_EQ(codec.Decode(bad, 10000).status().code(), StatusCode::kDataLoss);
  }
  {  // blocksize of zero or huge
    Buffer bad = Buffer::CopyOf(enc->view());
    StoreLE32(bad.data() + 8, 0);
    EXPECT_EQ(codec.Decode(bad, 10000).status().code(), StatusCode::kDataLoss);
  }
}

TEST(BloscCodec, EveryTruncationIsDataLoss) {
  BloscCodec codec("zstd", 5, Shuffle::kBitShuffle, 2, 0);
  Buffer in = RandomBytes(300, 6, true);
  auto enc = codec.Encode(in);
  ASSERT_TRUE(enc.ok());
  for (size_t cut = 0; cut < enc->size(); ++cut) {
    EXPECT_EQ(codec.Decode(enc->view().first(cut), 300).status().code(), StatusCode::kDataLoss)
        << "cut " << cut;
  }
}

TEST(BloscCodec, FlippedBytesNeverCrash) {
  for (const char* cname : {"lz4", "zstd", "blosclz"}) {
    BloscCodec codec(cname, 5, Shuffle::kShuffle, 4, 0);
    Buffer in = RandomBytes(4000, 7, true);
    auto enc = codec.Encode(in);
    ASSERT_TRUE(enc.ok());
    for (size_t i = 0; i < enc->size(); ++i) {
      Buffer bad = Buffer::CopyOf(enc->view());
      bad.data()[i] ^= 0xff;
      auto dec = codec.Decode(bad, 4000);
      if (!dec.ok()) {
        EXPECT_EQ(dec.status().code(), StatusCode::kDataLoss);
      } else {
        EXPECT_LE(dec->size(), 4000u);
      }
    }
  }
}

}  // namespace
}  // namespace cairn
