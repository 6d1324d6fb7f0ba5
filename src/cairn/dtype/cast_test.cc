#include "cairn/dtype/cast.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

namespace cairn {
namespace {

TEST(Cast, Float32ToBFloat16MatchesTheReferenceEncoder) {
  std::vector<float> values = {0.0f, -0.0f, 1.0f, -1.5f, 3.14159f, 1e-40f, -1e-45f, 65504.0f,
                               3.4e38f, std::numeric_limits<float>::infinity(),
                               -std::numeric_limits<float>::infinity(),
                               std::numeric_limits<float>::quiet_NaN()};
  // Ties: the low 16 bits exactly 0x8000 round to even.
  for (uint32_t bits : {0x3f808000u, 0x3f818000u, 0x7f7fffffu, 0x00008000u}) {
    float f;
    std::memcpy(&f, &bits, 4);
    values.push_back(f);
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 10000; ++i) {
    uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, 4);
    values.push_back(f);
  }
  std::vector<uint16_t> fast(values.size());
  ASSERT_TRUE(CastElements(DType::kFloat32, values.data(), DType::kBFloat16, fast.data(),
                           values.size()).ok());
  for (size_t i = 0; i < values.size(); ++i) {
    std::vector<uint8_t> ref = EncodeFloat(DType::kBFloat16, values[i]);
    uint16_t want;
    std::memcpy(&want, ref.data(), 2);
    if (std::isnan(values[i])) {
      EXPECT_TRUE(std::isnan(DecodeFloat(DType::kBFloat16, reinterpret_cast<uint8_t*>(&fast[i]))));
    } else {
      ASSERT_EQ(fast[i], want) << "value " << values[i] << " at " << i;
    }
  }
  // And back: bf16 -> f32 is exact.
  std::vector<float> back(values.size());
  ASSERT_TRUE(CastElements(DType::kBFloat16, fast.data(), DType::kFloat32, back.data(),
                           values.size()).ok());
  for (size_t i = 0; i < values.size(); ++i) {
    if (!std::isnan(values[i])) {
      EXPECT_EQ(back[i], DecodeFloat(DType::kBFloat16, reinterpret_cast<uint8_t*>(&fast[i])));
    }
  }
}

TEST(Cast, GenericFloatCastsRoundOnce) {
  std::vector<double> src = {1.0, 0.1, -2.5, 1e10};
  std::vector<uint16_t> half(4);
  ASSERT_TRUE(CastElements(DType::kFloat64, src.data(), DType::kFloat16, half.data(), 4).ok());
  EXPECT_EQ(half[0], 0x3c00);
  EXPECT_EQ(half[1], 0x2e66);  // 0.1 rounded once from double
  EXPECT_EQ(half[2], 0xc100);
  EXPECT_EQ(half[3], 0x7c00);  // overflow to +inf
}

TEST(Cast, OnlyFloatCastsAreOffered) {
  int32_t i = 5;
  int64_t o = 0;
  EXPECT_TRUE(CanCast(DType::kInt32, DType::kInt32));  // control: identity
  EXPECT_FALSE(CanCast(DType::kInt32, DType::kInt64));
  Status s = CastElements(DType::kInt32, &i, DType::kInt64, &o, 1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("int32 to int64"), std::string_view::npos);
  EXPECT_FALSE(CanCast(DType::kFloat32, DType::kComplex64));
}

}  // namespace
}  // namespace cairn
