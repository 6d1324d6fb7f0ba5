#include "cairn/layout/safetensors/format/safetensors_header.h"

#include <gtest/gtest.h>

namespace cairn::safetensors {
namespace {

std::string LengthPrefix(uint64_t n) {
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return s;
}

ByteView Bytes(const std::string& s) {
  return ByteView(reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

// Written by safetensors 0.8.0: save({"b": zeros((2,3), f32), "a": ones(3, i8),
// "c": ones(2, f16), "d": ones((), f64)}, metadata={"format": "np"}).
const char kPackageHeader[] =
    "{\"__metadata__\":{\"format\":\"np\"},"
    "\"d\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]},"
    "\"b\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[8,32]},"
    "\"c\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[32,36]},"
    "\"a\":{\"dtype\":\"I8\",\"shape\":[3],\"data_offsets\":[36,39]}}       ";

TEST(SafetensorsHeader, BuildMatchesThePackageByteForByte) {
  auto built = BuildHeader({{"b", DType::kFloat32, {2, 3}},
                            {"a", DType::kInt8, {3}},
                            {"c", DType::kFloat16, {2}},
                            {"d", DType::kFloat64, {}}},
                           {{"format", "np"}});
  ASSERT_TRUE(built.ok()) << built.status().ToString();
  EXPECT_EQ(built->bytes, LengthPrefix(256) + kPackageHeader);
  ASSERT_EQ(built->header.tensors.size(), 4u);
  EXPECT_EQ(built->header.tensors[0].name, "d");
  EXPECT_EQ(built->header.tensors[3].end, 39u);
  EXPECT_EQ(built->header.data_start, 8u + 256u);
}

TEST(SafetensorsHeader, EmptyFileIsTwoBracesPadded) {
  auto built = BuildHeader({}, {});
  ASSERT_TRUE(built.ok());
  EXPECT_EQ(built->bytes, LengthPrefix(8) + "{}      ");
}

TEST(SafetensorsHeader, ParsesThePackageHeader) {
  std::string header = kPackageHeader;
  auto parsed = ParseHeader(header, 8 + header.size() + 39, "x.safetensors");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  ASSERT_EQ(parsed->tensors.size(), 4u);
  EXPECT_EQ(parsed->tensors[1].name, "b");
  EXPECT_EQ(parsed->tensors[1].dtype, DType::kFloat32);
  EXPECT_EQ(parsed->tensors[1].shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(parsed->metadata.at("format"), "np");
  EXPECT_EQ(parsed->data_start, 8u + 256u);
}

TEST(SafetensorsHeader, RoundTripsEveryDType) {
  std::vector<TensorSpec> specs;
  int i = 0;
  for (const DTypeInfo& info : AllDTypes()) {
    if (!DTypeToSafetensors(info.dtype).ok()) continue;
    auto back = DTypeFromSafetensors(*DTypeToSafetensors(info.dtype));
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, info.dtype);
    specs.push_back({"t" + std::to_string(i++), info.dtype, {3, 0 + i}});
  }
  EXPECT_GE(specs.size(), 19u);
  auto built = BuildHeader(specs, {});
  ASSERT_TRUE(built.ok());
  uint64_t data = built->header.tensors.back().end;
  std::string json = built->bytes.substr(8);
  auto parsed = ParseHeader(json, built->bytes.size() + data, "f");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->tensors.size(), specs.size());
}

TEST(SafetensorsHeader, LengthPrefixIsChecked) {
  std::string ok = LengthPrefix(16);
  EXPECT_EQ(*ParseHeaderLength(Bytes(ok), 24, "f"), 16u);  // control
  auto past_end = ParseHeaderLength(Bytes(ok), 23, "f.safetensors");
  ASSERT_FALSE(past_end.ok());
  EXPECT_EQ(past_end.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(past_end.status().message().find("f.safetensors"), std::string_view::npos);
  EXPECT_NE(past_end.status().message().find("past the end"), std::string_view::npos);
  std::string huge = LengthPrefix(uint64_t{1} << 62);
  auto too_big = ParseHeaderLength(Bytes(huge), uint64_t{1} << 63, "f");
  ASSERT_FALSE(too_big.ok());
  EXPECT_NE(too_big.status().message().find("exceeds the limit"), std::string_view::npos);
  EXPECT_FALSE(ParseHeaderLength(Bytes(ok).subspan(0, 7), 24, "f").ok());
}

struct BadCase {
  const char* name;
  std::string json;
  uint64_t data_bytes;
  const char* message;
};

TEST(SafetensorsHeader, RejectsCorruptHeaders) {
  const std::string a = "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";
  std::vector<BadCase> cases = {
      {"control", "{" + a + "}", 8, nullptr},
      {"not json", "{" + a, 8, "safetensors header"},
      {"not an object", "[1]", 0, "not a JSON object"},
      {"hole", "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "hole"},
      {"overlap",
       "{" + a + ",\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8,
       "overlaps"},
      {"buffer not covered", "{" + a + "}", 9, "data buffer holds 9"},
      {"claims more than the file", "{" + a + "}", 7, "data buffer holds 7"},
      {"size mismatch", "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", 8,
       "make 12 bytes"},
      {"unknown dtype", "{\"a\":{\"dtype\":\"F7\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8,
       "unsupported safetensors dtype `F7`"},
      {"negative dim", "{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,0]}}", 0,
       "negative"},
      {"overflowing shape",
       "{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,0]}}",
       0, "overflows"},
      {"end before begin", "{\"a\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[5,4]}}",
       5, "end before begin"},
      {"offsets not a pair", "{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0]}}", 1,
       "[begin, end]"},
      {"metadata not strings", "{\"__metadata__\":{\"k\":1}," + a + "}", 8, "`k`"},
  };
  for (const BadCase& c : cases) {
    auto parsed = ParseHeader(c.json, 8 + c.json.size() + c.data_bytes, "m.safetensors");
    if (c.message == nullptr) {
      EXPECT_TRUE(parsed.ok()) << c.name << ": " << parsed.status().ToString();
      continue;
    }
    ASSERT_FALSE(parsed.ok()) << c.name;
    EXPECT_EQ(parsed.status().code(), StatusCode::kDataLoss) << c.name;
    EXPECT_NE(parsed.status().message().find(c.message), std::string_view::npos)
        << c.name << ": " << parsed.status().ToString();
    EXPECT_NE(parsed.status().message().find("m.safetensors"), std::string_view::npos) << c.name;
  }
}

TEST(SafetensorsHeader, BuildRejectsBadSpecs) {
  EXPECT_TRUE(BuildHeader({{"a", DType::kFloat32, {2}}}, {}).ok());  // control
  EXPECT_FALSE(BuildHeader({{"a", DType::kFloat32, {2}}, {"a", DType::kInt8, {1}}}, {}).ok());
  EXPECT_FALSE(BuildHeader({{"__metadata__", DType::kFloat32, {2}}}, {}).ok());
  EXPECT_FALSE(BuildHeader({{"a", DType::kFloat32, {-2}}}, {}).ok());
  EXPECT_FALSE(BuildHeader({{"a", DType::kComplex128, {2}}}, {}).ok());
  EXPECT_FALSE(BuildHeader({{"a", DType::kInt4, {2}}}, {}).ok());
}

TEST(SafetensorsHeader, NamesAreEscapedAsJson) {
  auto built = BuildHeader({{"we\"ird/\\name", DType::kUInt8, {1}}}, {});
  ASSERT_TRUE(built.ok());
  std::string json = built->bytes.substr(8);
  auto parsed = ParseHeader(json, built->bytes.size() + 1, "f");
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->tensors[0].name, "we\"ird/\\name");
}

}  // namespace
}  // namespace cairn::safetensors
