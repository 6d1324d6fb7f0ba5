// Integer fill values at the edges of each integer dtype's range, written
// as JSON integers and as JSON floats (zarr-python and others write 0.0 for
// integer arrays). A float that equals a bound only after rounding to double
// (9223372036854775808.0 == double(INT64_MAX)) is outside the range: before
// the fix it was stored as INT64_MIN.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "cairn/zarr/fill_value.h"

namespace cairn {
namespace {

struct Range {
  DType dtype;
  const char* lo;            // smallest value, as JSON integer text
  const char* hi;            // largest value
  const char* below;         // lo - 1 (JSON integer text)
  const char* above;         // hi + 1
  double hi_float;           // largest double <= hi
  double above_float;        // 2^k = hi + 1, exact
};

const Range kRanges[] = {
    {DType::kInt2, "-2", "1", "-3", "2", 1.0, 2.0},
    {DType::kInt4, "-8", "7", "-9", "8", 7.0, 8.0},
    {DType::kInt8, "-128", "127", "-129", "128", 127.0, 128.0},
    {DType::kInt16, "-32768", "32767", "-32769", "32768", 32767.0, 32768.0},
    {DType::kInt32, "-2147483648", "2147483647", "-2147483649", "2147483648", 2147483647.0,
     2147483648.0},
    // -9223372036854775809 is read as the double -2^63 (== lo), so "below"
    // is the next double down.
    {DType::kInt64, "-9223372036854775808", "9223372036854775807", "-9223372036854777856",
     "9223372036854775808", 9223372036854774784.0, 9223372036854775808.0},
    {DType::kUInt8, "0", "255", "-1", "256", 255.0, 256.0},
    {DType::kUInt16, "0", "65535", "-1", "65536", 65535.0, 65536.0},
    {DType::kUInt32, "0", "4294967295", "-1", "4294967296", 4294967295.0, 4294967296.0},
    {DType::kUInt64, "0", "18446744073709551615", "-1", "18446744073709551616",
     18446744073709549568.0, 18446744073709551616.0},
};

Json Parsed(const std::string& text) { return Json::parse(text); }

Json FloatJson(double d) { return Json(d); }  // a JSON number_float

bool AcceptedV3(const Json& j, DType dtype) { return ParseFillValueV3(j, dtype).ok(); }

TEST(FillValueRange, IntegerJsonAtAndBeyondTheBounds) {
  for (const Range& r : kRanges) {
    SCOPED_TRACE(r.hi);
    EXPECT_TRUE(AcceptedV3(Parsed(r.lo), r.dtype));
    EXPECT_TRUE(AcceptedV3(Parsed(r.hi), r.dtype));
    // Beyond: -9223372036854775809 and 18446744073709551616 are floats to
    // nlohmann (they fit no 64-bit integer); rejected all the same.
    EXPECT_FALSE(AcceptedV3(Parsed(r.below), r.dtype));
    auto above = ParseFillValueV3(Parsed(r.above), r.dtype);
    ASSERT_FALSE(above.ok());
    EXPECT_EQ(above.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(above.status().message().find(std::string("range [") + r.lo + ", " + r.hi + "]"),
              std::string_view::npos)
        << above.status().message();
  }
}

TEST(FillValueRange, FloatJsonRoundsNoBoundOpen) {
  for (const Range& r : kRanges) {
    SCOPED_TRACE(r.hi);
    // Control: the largest double not above hi round-trips to that value.
    auto hi = ParseFillValueV3(FloatJson(r.hi_float), r.dtype);
    ASSERT_TRUE(hi.ok()) << hi.status().ToString();
    const Json back = FillValueToJsonV3(r.dtype, *hi);
    EXPECT_EQ(static_cast<double>(back.is_number_unsigned() ? static_cast<double>(back.get<uint64_t>())
                                                             : static_cast<double>(back.get<int64_t>())),
              r.hi_float);
    // 2^k itself is out of range, for every width.
    auto above = ParseFillValueV3(FloatJson(r.above_float), r.dtype);
    ASSERT_FALSE(above.ok()) << "stored as " << FillValueToJsonV3(r.dtype, *above).dump();
    EXPECT_EQ(above.status().code(), StatusCode::kInvalidArgument);
    EXPECT_FALSE(AcceptedV3(FloatJson(std::nextafter(r.above_float, INFINITY)), r.dtype));
  }
}

TEST(FillValueRange, Int64TwoToThe63IsRejectedNotINT64_MIN) {
  auto bad = ParseFillValueV3(Parsed("9223372036854775808.0"), DType::kInt64);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("9223372036854775808"), std::string_view::npos);
  EXPECT_FALSE(ParseFillValueV2(Parsed("9223372036854775808.0"), DType::kInt64).ok());
  // Control: -2^63 as a float is INT64_MIN exactly.
  auto min = ParseFillValueV3(Parsed("-9223372036854775808.0"), DType::kInt64);
  ASSERT_TRUE(min.ok());
  EXPECT_EQ(FillValueToJsonV3(DType::kInt64, *min), Json(INT64_MIN));
  EXPECT_FALSE(AcceptedV3(Parsed("-9223372036854777856.0"), DType::kInt64));  // next double down
}

TEST(FillValueRange, Uint64AndNonIntegralFloats) {
  EXPECT_FALSE(AcceptedV3(Parsed("18446744073709551616.0"), DType::kUInt64));
  EXPECT_FALSE(AcceptedV3(Parsed("-1.0"), DType::kUInt64));
  EXPECT_FALSE(AcceptedV3(Parsed("1.5"), DType::kUInt64));
  auto zero = ParseFillValueV3(Parsed("-0.0"), DType::kUInt64);
  ASSERT_TRUE(zero.ok());
  EXPECT_EQ(FillValueToJsonV3(DType::kUInt64, *zero), Json(0u));
  auto big = ParseFillValueV3(Parsed("18446744073709549568.0"), DType::kUInt64);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(FillValueToJsonV3(DType::kUInt64, *big), Json(uint64_t{18446744073709549568u}));
}

}  // namespace
}  // namespace cairn
