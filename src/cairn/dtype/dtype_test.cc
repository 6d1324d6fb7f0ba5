#include "cairn/dtype/dtype.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>

namespace cairn {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kNegNaN = std::copysign(std::numeric_limits<double>::quiet_NaN(), -1.0);
const double kInf = std::numeric_limits<double>::infinity();
const double kNegInf = -std::numeric_limits<double>::infinity();

uint32_t Bits(const std::vector<uint8_t>& bytes) {
  uint32_t b = 0;
  for (size_t i = 0; i < bytes.size() && i < 4; ++i) b |= uint32_t{bytes[i]} << (8 * i);
  return b;
}

std::vector<uint8_t> FromBits(uint32_t bits, size_t size) {
  std::vector<uint8_t> out(size);
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<uint8_t>(bits >> (8 * i));
  return out;
}

TEST(DTypeTest, TableIsInEnumOrderWithConsistentSizes) {
  const auto& all = AllDTypes();
  ASSERT_EQ(all.size(), static_cast<size_t>(DType::kFloat4E2M1FN) + 1);
  std::set<std::string_view> names;
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(all[i].dtype), i);
    EXPECT_TRUE(names.insert(all[i].name).second) << all[i].name;
    EXPECT_EQ(all[i].size % all[i].swap_unit, 0u) << all[i].name;
  }
  EXPECT_EQ(DTypeSize(DType::kComplex128), 16u);
  EXPECT_EQ(GetDTypeInfo(DType::kComplex64).swap_unit, 4u);
  EXPECT_EQ(DTypeName(DType::kBFloat16), "bfloat16");
  EXPECT_EQ(DTypeSize(DType::kInt4), 1u);
}

TEST(DTypeTest, EveryNameParsesBack) {
  for (const DTypeInfo& info : AllDTypes()) {
    auto parsed = ParseDTypeName(info.name);
    ASSERT_TRUE(parsed.ok()) << info.name;
    EXPECT_EQ(*parsed, info.dtype);
    for (bool big : {false, true}) {
      std::string z2 = FormatZarr2DType(info.dtype, big);
      auto p2 = ParseZarr2DType(z2);
      ASSERT_TRUE(p2.ok()) << z2 << " " << p2.status().ToString();
      EXPECT_EQ(p2->dtype, info.dtype) << z2;
      EXPECT_EQ(p2->big_endian, big && info.zarr2_has_byte_order && info.swap_unit > 1) << z2;
    }
  }
  auto bad = ParseDTypeName("float128");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("float128"), std::string_view::npos);
}

TEST(DTypeTest, UserNamesTakeAliasesAndListTheValidNames) {
  const std::pair<const char*, DType> cases[] = {
      {"bf16", DType::kBFloat16}, {"fp16", DType::kFloat16}, {"half", DType::kFloat16},
      {"fp32", DType::kFloat32},  {"single", DType::kFloat32}, {"fp64", DType::kFloat64},
      {"double", DType::kFloat64}, {"float", DType::kFloat64},  // numpy's float
      {"bfloat16", DType::kBFloat16}, {"int8", DType::kInt8}};
  for (const auto& [name, dtype] : cases) {
    auto parsed = ParseUserDTypeName(name);
    ASSERT_TRUE(parsed.ok()) << name << " " << parsed.status().ToString();
    EXPECT_EQ(*parsed, dtype) << name;
  }
  // Stored metadata keeps exact names: an alias there is no dtype.
  EXPECT_FALSE(ParseDTypeName("bf16").ok());
  auto bad = ParseUserDTypeName("bf61");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  const std::string message(bad.status().message());
  for (const char* named : {"`bf61`", "bfloat16", "float32", "float8_e4m3fn", "bf16", "fp32"}) {
    EXPECT_NE(message.find(named), std::string::npos) << named << " in " << message;
  }
}

TEST(DTypeTest, Zarr2TypestrsAsTensorStoreWritesThem) {
  // Verified with tensorstore 0.1.86 (zarr driver spec().to_json()).
  EXPECT_EQ(FormatZarr2DType(DType::kBool), "|b1");
  EXPECT_EQ(FormatZarr2DType(DType::kInt8), "|i1");
  EXPECT_EQ(FormatZarr2DType(DType::kUInt8), "|u1");
  EXPECT_EQ(FormatZarr2DType(DType::kInt16), "<i2");
  EXPECT_EQ(FormatZarr2DType(DType::kUInt64), "<u8");
  EXPECT_EQ(FormatZarr2DType(DType::kFloat16), "<f2");
  EXPECT_EQ(FormatZarr2DType(DType::kFloat64), "<f8");
  EXPECT_EQ(FormatZarr2DType(DType::kComplex64), "<c8");
  EXPECT_EQ(FormatZarr2DType(DType::kComplex128), "<c16");
  EXPECT_EQ(FormatZarr2DType(DType::kFloat32, true), ">f4");
  EXPECT_EQ(FormatZarr2DType(DType::kBFloat16), "bfloat16");
  EXPECT_EQ(FormatZarr2DType(DType::kInt4), "int4");
  EXPECT_EQ(FormatZarr2DType(DType::kInt2), "int2");
  EXPECT_EQ(FormatZarr2DType(DType::kFloat4E2M1FN), "float4_e2m1fn");
  EXPECT_EQ(FormatZarr2DType(DType::kFloat8E8M0FNU), "float8_e8m0fnu");
}

TEST(DTypeTest, ParseZarr2ByteOrders) {
  auto be = ParseZarr2DType(">i8");
  ASSERT_TRUE(be.ok());
  EXPECT_EQ(be->dtype, DType::kInt64);
  EXPECT_TRUE(be->big_endian);
  auto native = ParseZarr2DType("=f4");
  ASSERT_TRUE(native.ok());
  EXPECT_EQ(native->dtype, DType::kFloat32);
  EXPECT_FALSE(native->big_endian);
  auto byte = ParseZarr2DType(">u1");  // byte order is meaningless for one byte
  ASSERT_TRUE(byte.ok());
  EXPECT_EQ(byte->dtype, DType::kUInt8);
  EXPECT_FALSE(byte->big_endian);
  auto cbe = ParseZarr2DType(">c16");
  ASSERT_TRUE(cbe.ok());
  EXPECT_EQ(cbe->dtype, DType::kComplex128);
  EXPECT_TRUE(cbe->big_endian);
  for (const char* bad : {"", "<", "f4", "<f3", "|i4", "!i4", "<bfloat16", "int3", "<b1x"}) {
    auto r = ParseZarr2DType(bad);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    }
  }
}

TEST(DTypeTest, SwapEndian) {
  std::vector<uint8_t> v = {1, 2, 3, 4, 5, 6, 7, 8};
  SwapEndianInPlace(v.data(), v.size(), 4);
  EXPECT_EQ(v, (std::vector<uint8_t>{4, 3, 2, 1, 8, 7, 6, 5}));
  SwapEndianInPlace(v.data(), v.size(), 2);
  EXPECT_EQ(v, (std::vector<uint8_t>{3, 4, 1, 2, 7, 8, 5, 6}));
  SwapEndianInPlace(v.data(), v.size(), 8);
  EXPECT_EQ(v, (std::vector<uint8_t>{6, 5, 8, 7, 2, 1, 4, 3}));
  SwapEndianInPlace(v.data(), v.size(), 1);
  EXPECT_EQ(v, (std::vector<uint8_t>{6, 5, 8, 7, 2, 1, 4, 3}));
}

const DType kSmallFloats[] = {
    DType::kFloat8E3M4,      DType::kFloat8E4M3FN, DType::kFloat8E4M3FNUZ,
    DType::kFloat8E4M3B11FNUZ, DType::kFloat8E5M2, DType::kFloat8E5M2FNUZ,
    DType::kFloat8E8M0FNU,   DType::kFloat16,      DType::kBFloat16,
};

TEST(DTypeTest, ExhaustiveRoundTrip) {
  for (DType d : kSmallFloats) {
    const size_t size = DTypeSize(d);
    const uint32_t count = size == 1 ? 256 : 65536;
    int nans = 0;
    for (uint32_t bits = 0; bits < count; ++bits) {
      auto bytes = FromBits(bits, size);
      double v = DecodeFloat(d, bytes.data());
      auto back = EncodeFloat(d, v);
      if (std::isnan(v)) {
        ++nans;
        EXPECT_TRUE(std::isnan(DecodeFloat(d, back.data()))) << DTypeName(d) << " " << bits;
      } else {
        EXPECT_EQ(Bits(back), bits) << DTypeName(d) << " value " << v;
      }
    }
    EXPECT_GT(nans, 0) << DTypeName(d);
  }
}

TEST(DTypeTest, Float4RoundTripAndPadding) {
  for (uint32_t bits = 0; bits < 16; ++bits) {
    uint8_t b = static_cast<uint8_t>(bits);
    double v = DecodeFloat(DType::kFloat4E2M1FN, &b);
    ASSERT_FALSE(std::isnan(v));
    EXPECT_EQ(Bits(EncodeFloat(DType::kFloat4E2M1FN, v)), bits) << v;
    uint8_t padded = static_cast<uint8_t>(bits | 0xa0);  // readers use the low 4 bits only
    EXPECT_EQ(DecodeFloat(DType::kFloat4E2M1FN, &padded), v);
  }
  uint8_t max = 0x7;
  EXPECT_EQ(DecodeFloat(DType::kFloat4E2M1FN, &max), 6.0);
}

TEST(DTypeTest, Float32AndFloat64) {
  EXPECT_EQ(Bits(EncodeFloat(DType::kFloat32, 1.0)), 0x3f800000u);
  EXPECT_EQ(Bits(EncodeFloat(DType::kFloat32, 1e300)), 0x7f800000u);
  EXPECT_EQ(Bits(EncodeFloat(DType::kFloat32, -0.0)), 0x80000000u);
  // 1 + 2^-24 is a tie between 1 and 1 + 2^-23: rounds to even (1.0).
  EXPECT_EQ(Bits(EncodeFloat(DType::kFloat32, 1.0 + std::ldexp(1.0, -24))), 0x3f800000u);
  EXPECT_EQ(Bits(EncodeFloat(DType::kFloat32, 1.0 + 3 * std::ldexp(1.0, -24))), 0x3f800002u);
  auto d = EncodeFloat(DType::kFloat64, 0.1);
  EXPECT_EQ(DecodeFloat(DType::kFloat64, d.data()), 0.1);
  auto f = EncodeFloat(DType::kFloat32, 0.5);
  EXPECT_EQ(DecodeFloat(DType::kFloat32, f.data()), 0.5);
}

struct Spot {
  DType dtype;
  double value;
  uint32_t bits;
};

// Expected bit patterns from ml_dtypes 0.7 / numpy:
//   np.array([value], np.float64).astype(T).view(uint8 or uint16)
const Spot kSpots[] = {
#include "cairn/dtype/dtype_test_spot_values.inc"
    // float8_e8m0fnu rounds ties upward; float4_e2m1fn ties to even.
    {DType::kFloat8E8M0FNU, 1.5, 0x80},
    {DType::kFloat8E8M0FNU, 3.0, 0x81},
    {DType::kFloat8E8M0FNU, 0.75, 0x7f},
    {DType::kFloat8E8M0FNU, 1.4, 0x7f},
    {DType::kFloat4E2M1FN, 0.25, 0x0},
    {DType::kFloat4E2M1FN, 0.75, 0x2},
    {DType::kFloat4E2M1FN, 1.25, 0x2},
    {DType::kFloat4E2M1FN, 1.75, 0x4},
    {DType::kFloat4E2M1FN, 5.0, 0x6},
    {DType::kFloat4E2M1FN, 5.1, 0x7},
    {DType::kFloat4E2M1FN, 100.0, 0x7},
    {DType::kFloat8E4M3FN, 464.0, 0x7e},
    {DType::kFloat8E4M3FN, 464.01, 0x7f},
    {DType::kFloat8E5M2, 61440.0, 0x7c},
    {DType::kFloat8E5M2, 61439.0, 0x7b},
};

TEST(DTypeTest, SpotValuesMatchMlDtypes) {
  for (const Spot& s : kSpots) {
    EXPECT_EQ(Bits(EncodeFloat(s.dtype, s.value)), s.bits)
        << DTypeName(s.dtype) << " value " << s.value;
    // Decoding the pattern gives back a value that encodes to the same bits.
    auto bytes = FromBits(s.bits, DTypeSize(s.dtype));
    double back = DecodeFloat(s.dtype, bytes.data());
    if (!std::isnan(back)) {
      EXPECT_EQ(Bits(EncodeFloat(s.dtype, back)), s.bits);
    }
  }
}

TEST(DTypeTest, DecodeSpecialValues) {
  uint8_t b = 0x7e;
  EXPECT_EQ(DecodeFloat(DType::kFloat8E4M3FN, &b), 448.0);
  b = 0x7f;
  EXPECT_TRUE(std::isnan(DecodeFloat(DType::kFloat8E4M3FN, &b)));
  b = 0xff;
  EXPECT_TRUE(std::isnan(DecodeFloat(DType::kFloat8E4M3FN, &b)));
  b = 0x80;
  EXPECT_TRUE(std::isnan(DecodeFloat(DType::kFloat8E4M3FNUZ, &b)));
  EXPECT_TRUE(std::isnan(DecodeFloat(DType::kFloat8E5M2FNUZ, &b)));
  b = 0x7f;
  EXPECT_EQ(DecodeFloat(DType::kFloat8E4M3FNUZ, &b), 240.0);
  EXPECT_EQ(DecodeFloat(DType::kFloat8E4M3B11FNUZ, &b), 30.0);
  EXPECT_EQ(DecodeFloat(DType::kFloat8E5M2FNUZ, &b), 57344.0);
  b = 0x00;
  EXPECT_EQ(DecodeFloat(DType::kFloat8E8M0FNU, &b), std::ldexp(1.0, -127));
  b = 0x7c;
  EXPECT_EQ(DecodeFloat(DType::kFloat8E5M2, &b), kInf);
  b = 0xf0;
  EXPECT_EQ(DecodeFloat(DType::kFloat8E3M4, &b), kNegInf);
  b = 0x80;
  double neg_zero = DecodeFloat(DType::kFloat8E4M3FN, &b);
  EXPECT_EQ(neg_zero, 0.0);
  EXPECT_TRUE(std::signbit(neg_zero));
  b = 0x01;  // smallest subnormal of e4m3fn: 2^-9
  EXPECT_EQ(DecodeFloat(DType::kFloat8E4M3FN, &b), std::ldexp(1.0, -9));
}

TEST(DTypeTest, DefaultNaNAndInfinity) {
  // TensorStore's "NaN" fill values (checked with a zarr3 array, fill_value "NaN").
  EXPECT_EQ(Bits(DefaultNaN(DType::kFloat16)), 0x7e00u);
  EXPECT_EQ(Bits(DefaultNaN(DType::kBFloat16)), 0x7fc0u);
  EXPECT_EQ(Bits(DefaultNaN(DType::kFloat32)), 0x7fc00000u);
  auto f64 = DefaultNaN(DType::kFloat64);
  ASSERT_EQ(f64.size(), 8u);
  EXPECT_EQ(f64, (std::vector<uint8_t>{0, 0, 0, 0, 0, 0, 0xf8, 0x7f}));
  EXPECT_EQ(Bits(DefaultNaN(DType::kFloat8E4M3FN)), 0x7fu);
  EXPECT_EQ(Bits(DefaultNaN(DType::kFloat8E4M3FNUZ)), 0x80u);
  EXPECT_EQ(Bits(DefaultNaN(DType::kFloat8E4M3B11FNUZ)), 0x80u);
  EXPECT_EQ(Bits(DefaultNaN(DType::kFloat8E5M2FNUZ)), 0x80u);
  EXPECT_EQ(Bits(DefaultNaN(DType::kFloat8E3M4)), 0x78u);
  EXPECT_EQ(Bits(DefaultNaN(DType::kFloat8E5M2)), 0x7eu);
  EXPECT_EQ(Bits(DefaultNaN(DType::kFloat8E8M0FNU)), 0xffu);
  EXPECT_EQ(Bits(DefaultNaN(DType::kFloat4E2M1FN)), 0x8u);  // no NaN: TensorStore gives -0.0
  for (DType d : kSmallFloats) {
    auto nan = DefaultNaN(d);
    EXPECT_TRUE(std::isnan(DecodeFloat(d, nan.data()))) << DTypeName(d);
  }
  EXPECT_TRUE(HasInfinity(DType::kFloat16));
  EXPECT_TRUE(HasInfinity(DType::kBFloat16));
  EXPECT_TRUE(HasInfinity(DType::kFloat8E5M2));
  EXPECT_TRUE(HasInfinity(DType::kFloat8E3M4));
  EXPECT_FALSE(HasInfinity(DType::kFloat8E4M3FN));
  EXPECT_FALSE(HasInfinity(DType::kFloat8E5M2FNUZ));
  EXPECT_FALSE(HasInfinity(DType::kFloat8E8M0FNU));
  EXPECT_FALSE(HasInfinity(DType::kFloat4E2M1FN));
}

}  // namespace
}  // namespace cairn
