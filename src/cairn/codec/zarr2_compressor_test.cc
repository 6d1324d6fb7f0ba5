#include "cairn/codec/zarr2_compressor.h"

#include <gtest/gtest.h>

#include "cairn/codec/blosc_codec.h"
#include "cairn/codec/codec_test_util.h"
#include "cairn/codec/gzip_codec.h"
#include "cairn/codec/zstd_codec.h"
#include "cairn/util/json.h"

namespace cairn {
namespace {

using codec_test::ParseOrDie;
using codec_test::RandomBytes;

TEST(Zarr2Compressor, WrittenBackAsTensorStoreWritesIt) {
  struct Case {
    const char* in;
    DType dtype;
    const char* out;  // observed in .zarray files written by TensorStore 0.1.86
  };
  for (const Case& c : std::vector<Case>{
           {R"({"id":"zstd"})", DType::kFloat32, R"({"id":"zstd","level":1})"},
           {R"({"id":"zstd","level":5})", DType::kFloat32, R"({"id":"zstd","level":5})"},
           {R"({"id":"zlib"})", DType::kFloat32, R"({"id":"zlib","level":1})"},
           {R"({"id":"gzip","level":7})", DType::kFloat32, R"({"id":"gzip","level":7})"},
           {R"({"id":"blosc"})", DType::kFloat32,
            R"({"blocksize":0,"clevel":5,"cname":"lz4","id":"blosc","shuffle":-1})"},
           {R"({"id":"blosc","cname":"zstd","clevel":3,"shuffle":2,"blocksize":256})",
            DType::kFloat32,
            R"({"blocksize":256,"clevel":3,"cname":"zstd","id":"blosc","shuffle":2})"},
           {R"({"id":"blosc"})", DType::kUInt8,
            R"({"blocksize":0,"clevel":5,"cname":"lz4","id":"blosc","shuffle":-1})"},
       }) {
    auto r = ParseZarr2Compressor(ParseOrDie(c.in), c.dtype);
    ASSERT_TRUE(r.ok()) << c.in << ": " << r.status().ToString();
    EXPECT_EQ(DumpJson(r->json), c.out);
    ASSERT_NE(r->codec, nullptr);
    Buffer in = RandomBytes(4000, 1, true);
    auto enc = r->codec->Encode(in);
    ASSERT_TRUE(enc.ok());
    auto dec = r->codec->Decode(*enc, in.size());
    ASSERT_TRUE(dec.ok()) << c.in;
    EXPECT_EQ(*dec, in);
  }
  auto none = ParseZarr2Compressor(Json(nullptr), DType::kFloat32);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->codec, nullptr);
  EXPECT_EQ(DumpJson(none->json), "null");
}

TEST(Zarr2Compressor, BloscAutoShuffleDependsOnElementSize) {
  auto u8 = ParseZarr2Compressor(ParseOrDie(R"({"id":"blosc","shuffle":-1})"), DType::kUInt8);
  ASSERT_TRUE(u8.ok());
  auto* b1 = dynamic_cast<const BloscCodec*>(u8->codec.get());
  ASSERT_NE(b1, nullptr);
  EXPECT_EQ(b1->shuffle(), BloscCodec::Shuffle::kBitShuffle);
  EXPECT_EQ(b1->typesize(), 1);
  auto f8 = ParseZarr2Compressor(ParseOrDie(R"({"id":"blosc","shuffle":-1})"), DType::kFloat64);
  ASSERT_TRUE(f8.ok());
  auto* b8 = dynamic_cast<const BloscCodec*>(f8->codec.get());
  ASSERT_NE(b8, nullptr);
  EXPECT_EQ(b8->shuffle(), BloscCodec::Shuffle::kShuffle);
  EXPECT_EQ(b8->typesize(), 8);
  auto none = ParseZarr2Compressor(ParseOrDie(R"({"id":"blosc","shuffle":0})"), DType::kFloat64);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(dynamic_cast<const BloscCodec*>(none->codec.get())->shuffle(),
            BloscCodec::Shuffle::kNoShuffle);
}

TEST(Zarr2Compressor, KindsMatchIds) {
  auto z = ParseZarr2Compressor(ParseOrDie(R"({"id":"zlib","level":4})"), DType::kFloat32);
  ASSERT_TRUE(z.ok());
  auto* zl = dynamic_cast<const DeflateCodec*>(z->codec.get());
  ASSERT_NE(zl, nullptr);
  EXPECT_EQ(zl->format(), DeflateCodec::Format::kZlib);
  EXPECT_EQ(zl->level(), 4);
  // zlib streams start with a CMF byte 0x78.
  auto enc = zl->Encode(AsBytes("hello"));
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(enc->data()[0], 0x78);
  auto g = ParseZarr2Compressor(ParseOrDie(R"({"id":"gzip"})"), DType::kFloat32);
  ASSERT_TRUE(g.ok());
  auto genc = g->codec->Encode(AsBytes("hello"));
  ASSERT_TRUE(genc.ok());
  EXPECT_EQ(genc->data()[0], 0x1f);
  EXPECT_EQ(genc->data()[1], 0x8b);
  auto s = ParseZarr2Compressor(ParseOrDie(R"({"id":"zstd","level":2})"), DType::kFloat32);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(dynamic_cast<const ZstdCodec*>(s->codec.get())->level(), 2);
}

TEST(Zarr2Compressor, RejectsInvalid) {
  for (const char* text : {R"({"id":"lzma"})", R"({"level":1})", R"("zstd")", R"(5)",
                           R"({"id":"zstd","level":"1"})", R"({"id":"zstd","foo":1})",
                           R"({"id":"zlib","level":12})", R"({"id":"blosc","shuffle":3})",
                           R"({"id":"blosc","cname":"lzma"})", R"({"id":"blosc","clevel":-1})",
                           R"({"id":"blosc","blocksize":-5})"}) {
    EXPECT_EQ(ParseZarr2Compressor(ParseOrDie(text), DType::kFloat32).status().code(),
              StatusCode::kInvalidArgument)
        << text;
  }
}

TEST(Zarr2Compressor, DefaultIsBloscLz4) {
  Zarr2Compressor d = DefaultZarr2Compressor(DType::kInt32);
  EXPECT_EQ(DumpJson(d.json),
            R"({"blocksize":0,"clevel":5,"cname":"lz4","id":"blosc","shuffle":-1})");
  ASSERT_NE(d.codec, nullptr);
}

}  // namespace
}  // namespace cairn
