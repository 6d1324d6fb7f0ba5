#include "cairn/codec/transpose_codec.h"

#include <gtest/gtest.h>

#include "cairn/codec/codec_test_util.h"

namespace cairn {
namespace {

using codec_test::MakeSpec;
using codec_test::ParseOrDie;
using codec_test::RandomBytes;

TEST(TransposeCodec, ReversedOrderIsMatrixTranspose) {
  ChunkSpec spec = MakeSpec(DType::kUInt16, {2, 3});
  TransposeCodec codec({1, 0});
  EXPECT_EQ(codec.EncodedSpec(spec).shape, (Shape{3, 2}));
  std::vector<uint16_t> in = {0, 1, 2, 10, 11, 12};  // [[0,1,2],[10,11,12]]
  auto enc = codec.Encode(spec, ByteView(reinterpret_cast<uint8_t*>(in.data()), 12));
  ASSERT_TRUE(enc.ok());
  std::vector<uint16_t> got(6);
  std::memcpy(got.data(), enc->data(), 12);
  EXPECT_EQ(got, (std::vector<uint16_t>{0, 10, 1, 11, 2, 12}));
  auto dec = codec.Decode(spec, *enc);
  ASSERT_TRUE(dec.ok());
  EXPECT_EQ(std::memcmp(dec->data(), in.data(), 12), 0);
}

TEST(TransposeCodec, RoundTripRank4Permutations) {
  for (std::vector<int64_t> order : {std::vector<int64_t>{0, 1, 2, 3}, {3, 2, 1, 0},
                                     {2, 0, 3, 1}, {1, 3, 0, 2}}) {
    for (DType d : {DType::kUInt8, DType::kFloat32, DType::kComplex128}) {
      ChunkSpec spec = MakeSpec(d, {2, 3, 4, 5});
      TransposeCodec codec(order);
      Buffer in = RandomBytes(spec.num_bytes(), 7);
      auto enc = codec.Encode(spec, in);
      ASSERT_TRUE(enc.ok());
      // Encoded element e corresponds to decoded element d with d[order[i]] = e[i].
      const size_t es = DTypeSize(d);
      const Shape eshape = codec.EncodedSpec(spec).shape;
      auto dstr = CStrides(spec.shape, es);
      auto estr = CStrides(eshape, es);
      Index e[4];
      for (e[0] = 0; e[0] < eshape[0]; ++e[0])
        for (e[1] = 0; e[1] < eshape[1]; ++e[1])
          for (e[2] = 0; e[2] < eshape[2]; ++e[2])
            for (e[3] = 0; e[3] < eshape[3]; ++e[3]) {
              Index eoff = 0, doff = 0;
              for (int i = 0; i < 4; ++i) {
                eoff += e[i] * estr[i];
                doff += e[i] * dstr[order[i]];
              }
              ASSERT_EQ(std::memcmp(enc->data() + eoff, in.data() + doff, es), 0);
            }
      auto dec = codec.Decode(spec, *enc);
      ASSERT_TRUE(dec.ok());
      EXPECT_EQ(*dec, in);
    }
  }
}

TEST(TransposeCodec, ParsesLegacyCAndFAsPermutations) {
  ChunkSpec spec = MakeSpec(DType::kFloat32, {2, 3, 4});
  Json f = {{"order", "F"}};
  auto codec = TransposeCodec::FromJson(&f, spec);
  ASSERT_TRUE(codec.ok());
  EXPECT_EQ((*codec)->order(), (std::vector<int64_t>{2, 1, 0}));
  EXPECT_EQ((*codec)->ToJson(),
            ParseOrDie(R"({"configuration":{"order":[2,1,0]},"name":"transpose"})"));
  Json c = {{"order", "C"}};
  auto ccodec = TransposeCodec::FromJson(&c, spec);
  ASSERT_TRUE(ccodec.ok());
  EXPECT_EQ((*ccodec)->order(), (std::vector<int64_t>{0, 1, 2}));
}

TEST(TransposeCodec, RejectsInvalidOrders) {
  ChunkSpec spec = MakeSpec(DType::kFloat32, {2, 3});
  for (const char* text : {R"({"order":[0]})", R"({"order":[0,0]})", R"({"order":[0,2]})",
                           R"({"order":[-1,0]})", R"({"order":"X"})", R"({"order":[0.5,1]})",
                           R"({})", R"({"order":[1,0],"x":1})"}) {
    Json config = ParseOrDie(text);
    EXPECT_EQ(TransposeCodec::FromJson(&config, spec).status().code(),
              StatusCode::kInvalidArgument)
        << text;
  }
  EXPECT_EQ(TransposeCodec::FromJson(nullptr, spec).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(TransposeCodec, WrongSizeIsDataLoss) {
  ChunkSpec spec = MakeSpec(DType::kFloat32, {2, 3});
  TransposeCodec codec({1, 0});
  Buffer in = RandomBytes(20, 1);
  EXPECT_EQ(codec.Decode(spec, in).status().code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace cairn
