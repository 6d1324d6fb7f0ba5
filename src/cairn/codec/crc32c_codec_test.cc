#include "cairn/codec/crc32c_codec.h"

#include <gtest/gtest.h>

#include "cairn/codec/codec_test_util.h"

namespace cairn {
namespace {

using codec_test::ParseOrDie;
using codec_test::RandomBytes;

TEST(Crc32cCodec, AppendsLittleEndianChecksum) {
  Crc32cCodec codec;
  auto enc = codec.Encode(AsBytes("123456789"));
  ASSERT_TRUE(enc.ok());
  ASSERT_EQ(enc->size(), 13u);
  // CRC-32C("123456789") = 0xE3069283, stored little-endian.
  EXPECT_EQ(enc->as_string_view().substr(9), std::string("\x83\x92\x06\xe3", 4));
  auto dec = codec.Decode(*enc);
  ASSERT_TRUE(dec.ok());
  EXPECT_EQ(dec->as_string_view(), "123456789");
  EXPECT_EQ(codec.ToJson(), ParseOrDie(R"({"name":"crc32c"})"));
}

TEST(Crc32cCodec, RoundTripSizes) {
  Crc32cCodec codec;
  for (size_t n : {0, 1, 7, 4096, 100000}) {
    Buffer in = RandomBytes(n, static_cast<uint32_t>(n));
    auto enc = codec.Encode(in);
    ASSERT_TRUE(enc.ok());
    EXPECT_EQ(enc->size(), n + 4);
    EXPECT_LE(enc->size(), codec.MaxEncodedSize(n));
    auto dec = codec.Decode(*enc);
    ASSERT_TRUE(dec.ok());
    EXPECT_EQ(*dec, in);
  }
}

TEST(Crc32cCodec, EveryFlippedBitIsDetected) {
  Crc32cCodec codec;
  Buffer in = RandomBytes(40, 9);
  auto enc = codec.Encode(in);
  ASSERT_TRUE(enc.ok());
  for (size_t i = 0; i < enc->size() * 8; ++i) {
    Buffer bad = Buffer::CopyOf(enc->view());
    bad.data()[i / 8] ^= static_cast<uint8_t>(1u << (i % 8));
    auto dec = codec.Decode(bad);
    ASSERT_EQ(dec.status().code(), StatusCode::kDataLoss) << "bit " << i;
    EXPECT_NE(dec.status().message().find("crc32c mismatch: stored 0x"), std::string::npos);
    EXPECT_NE(dec.status().message().find(", computed 0x"), std::string::npos);
  }
}

TEST(Crc32cCodec, MismatchMessageNamesBothValues) {
  Buffer bad = Buffer::CopyOf(std::string_view("123456789\x01\x02\x03\x04", 13));
  auto dec = Crc32cCodec().Decode(bad);
  ASSERT_EQ(dec.status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(dec.status().message(), "crc32c mismatch: stored 0x04030201, computed 0xe3069283");
}

TEST(Crc32cCodec, TooShortIsDataLoss) {
  Crc32cCodec codec;
  for (size_t n = 0; n < 4; ++n) {
    Buffer in = RandomBytes(n, 1);
    EXPECT_EQ(codec.Decode(in).status().code(), StatusCode::kDataLoss);
  }
}

TEST(Crc32cCodec, ConfigurationMustBeEmpty) {
  Json empty = Json::object();
  EXPECT_TRUE(Crc32cCodec::FromJson(&empty).ok());
  EXPECT_TRUE(Crc32cCodec::FromJson(nullptr).ok());
  Json extra = {{"x", 1}};
  EXPECT_EQ(Crc32cCodec::FromJson(&extra).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cairn

namespace cairn {
namespace {

TEST(Crc32cCodec, CopyVerifiedCopiesAndChecksInOnePass) {
  Buffer payload(700 << 10);  // several blocks
  for (size_t i = 0; i < payload.size(); ++i) payload.data()[i] = static_cast<uint8_t>(i * 131 + 7);
  auto encoded = Crc32cCodec().Encode(payload.view());
  ASSERT_TRUE(encoded.ok());
  Buffer out(payload.size());
  ASSERT_TRUE(Crc32cCodec::CopyVerified(encoded->view(), out.mutable_view()).ok());
  EXPECT_EQ(std::memcmp(out.data(), payload.data(), payload.size()), 0);
  for (size_t at : {size_t{0}, size_t{300000}, payload.size() - 1, payload.size() + 2}) {
    Buffer bad = Buffer::CopyOf(encoded->view());
    bad.data()[at] ^= 0x80;
    const Status s = Crc32cCodec::CopyVerified(bad.view(), out.mutable_view());
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << at;
    EXPECT_NE(s.ToString().find("crc32c mismatch"), std::string::npos) << s.ToString();
  }
  Buffer small(10);
  EXPECT_EQ(Crc32cCodec::CopyVerified(encoded->view(), small.mutable_view()).code(), StatusCode::kDataLoss);
}

}  // namespace
}  // namespace cairn
