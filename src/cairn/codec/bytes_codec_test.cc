#include "cairn/codec/bytes_codec.h"

#include <gtest/gtest.h>

#include "cairn/codec/codec_test_util.h"

namespace cairn {
namespace {

using codec_test::MakeSpec;
using codec_test::ParseOrDie;
using codec_test::RandomBytes;

TEST(BytesCodec, LittleEndianIsIdentity) {
  ChunkSpec spec = MakeSpec(DType::kFloat32, {3, 5});
  Json config = {{"endian", "little"}};
  auto codec = BytesArrayCodec::FromJson(&config, spec);
  ASSERT_TRUE(codec.ok()) << codec.status().ToString();
  EXPECT_TRUE((*codec)->IsIdentity(spec));
  Buffer in = RandomBytes(spec.num_bytes(), 1);
  auto enc = (*codec)->Encode(spec, in);
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(*enc, in);
  auto dec = (*codec)->Decode(spec, *enc);
  ASSERT_TRUE(dec.ok());
  EXPECT_EQ(*dec, in);
  EXPECT_EQ((*codec)->ToJson(),
            ParseOrDie(R"({"configuration":{"endian":"little"},"name":"bytes"})"));
}

TEST(BytesCodec, BigEndianSwapsBySwapUnit) {
  struct Case {
    DType dtype;
    size_t unit;
  };
  for (Case c : {Case{DType::kUInt16, 2}, Case{DType::kInt32, 4}, Case{DType::kFloat64, 8},
                 Case{DType::kBFloat16, 2}, Case{DType::kComplex64, 4},
                 Case{DType::kComplex128, 8}}) {
    ChunkSpec spec = MakeSpec(c.dtype, {2, 3});
    Json config = {{"endian", "big"}};
    auto codec = BytesArrayCodec::FromJson(&config, spec);
    ASSERT_TRUE(codec.ok());
    EXPECT_FALSE((*codec)->IsIdentity(spec));
    Buffer in = RandomBytes(spec.num_bytes(), 2);
    auto enc = (*codec)->Encode(spec, in);
    ASSERT_TRUE(enc.ok());
    for (size_t i = 0; i < in.size(); ++i) {
      const size_t group = i / c.unit, pos = i % c.unit;
      ASSERT_EQ(enc->data()[i], in.data()[group * c.unit + (c.unit - 1 - pos)])
          << DTypeName(c.dtype) << " byte " << i;
    }
    auto dec = (*codec)->Decode(spec, *enc);
    ASSERT_TRUE(dec.ok());
    EXPECT_EQ(*dec, in);
  }
}

TEST(BytesCodec, OneByteTypesOmitEndian) {
  for (DType d : {DType::kUInt8, DType::kBool, DType::kInt4, DType::kFloat8E4M3FN}) {
    ChunkSpec spec = MakeSpec(d, {4});
    auto none = BytesArrayCodec::FromJson(nullptr, spec);
    ASSERT_TRUE(none.ok()) << DTypeName(d);
    EXPECT_EQ((*none)->ToJson(), ParseOrDie(R"({"name":"bytes"})"));
    Json config = {{"endian", "big"}};
    auto big = BytesArrayCodec::FromJson(&config, spec);
    ASSERT_TRUE(big.ok());
    EXPECT_EQ((*big)->ToJson(), ParseOrDie(R"({"name":"bytes"})"));
    EXPECT_TRUE((*big)->IsIdentity(spec));
  }
}

TEST(BytesCodec, RejectsBadConfiguration) {
  ChunkSpec spec = MakeSpec(DType::kUInt16, {4});
  auto missing = BytesArrayCodec::FromJson(nullptr, spec);
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  Json empty = Json::object();
  EXPECT_EQ(BytesArrayCodec::FromJson(&empty, spec).status().code(),
            StatusCode::kInvalidArgument);
  Json wrong = {{"endian", "middle"}};
  EXPECT_EQ(BytesArrayCodec::FromJson(&wrong, spec).status().code(),
            StatusCode::kInvalidArgument);
  Json not_string = {{"endian", 1}};
  EXPECT_EQ(BytesArrayCodec::FromJson(&not_string, spec).status().code(),
            StatusCode::kInvalidArgument);
  Json extra = {{"endian", "little"}, {"foo", 1}};
  EXPECT_EQ(BytesArrayCodec::FromJson(&extra, spec).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(BytesCodec, WrongSizeIsDataLoss) {
  ChunkSpec spec = MakeSpec(DType::kUInt32, {4});
  BytesArrayCodec codec(Endian::kLittle);
  Buffer short_input = RandomBytes(15, 3);
  EXPECT_EQ(codec.Decode(spec, short_input).status().code(), StatusCode::kDataLoss);
  Buffer long_input = RandomBytes(17, 3);
  EXPECT_EQ(codec.Decode(spec, long_input).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(codec.Encode(spec, short_input).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cairn
