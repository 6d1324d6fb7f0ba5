#include "cairn/codec/sharding_codec.h"

#include <gtest/gtest.h>

#include "cairn/codec/codec_test_util.h"
#include "cairn/util/coding.h"
#include "cairn/util/crc32c.h"

namespace cairn {
namespace {

using codec_test::FromHex;
using codec_test::MakeSpec;
using codec_test::ParseOrDie;
using codec_test::RandomBytes;
using codec_test::ToHex;

std::shared_ptr<const ShardingCodec> Parse(std::string_view config_text, const ChunkSpec& spec) {
  Json config = ParseOrDie(config_text);
  auto codec = ShardingCodec::FromJson(&config, spec);
  EXPECT_TRUE(codec.ok()) << codec.status().ToString();
  return codec.ok() ? *codec : nullptr;
}

Buffer Arange16() {
  Buffer b(32);
  for (int i = 0; i < 16; ++i) StoreLE16(b.data() + 2 * i, static_cast<uint16_t>(i));
  return b;
}

// Written by TensorStore 0.1.86: zarr3 uint16 [4,4], shard = the whole array,
// inner chunks [2,2] with codecs [bytes(little)], default index codecs.
// Data arange(16) with [0:2, 2:4] set to 0 (inner chunk 1 is all fill and
// was omitted).
constexpr std::string_view kTensorStoreConfig =
    R"({"chunk_shape":[2,2],"codecs":[{"configuration":{"endian":"little"},"name":"bytes"}],)"
    R"("index_codecs":[{"configuration":{"endian":"little"},"name":"bytes"},{"name":"crc32c"}]})";
constexpr std::string_view kTensorStoreShard =
    "0000010004000500080009000c000d000a000b000e000f0000000000000000000800000000000000ffffffff"
    "ffffffffffffffffffffffff0800000000000000080000000000000010000000000000000800000000000000"
    "002c1579";
// Same array shape, all of arange(16), inner codecs bytes + gzip(level 1),
// index_location "start".
constexpr std::string_view kTensorStoreStartConfig =
    R"({"chunk_shape":[2,2],"codecs":[{"configuration":{"endian":"little"},"name":"bytes"},)"
    R"({"configuration":{"level":1},"name":"gzip"}],"index_codecs":[{"configuration":)"
    R"({"endian":"little"},"name":"bytes"},{"name":"crc32c"}],"index_location":"start"})";
constexpr std::string_view kTensorStoreStartShard =
    "44000000000000001c0000000000000060000000000000001c000000000000007c000000000000001c0000000000"
    "000098000000000000001c000000000000004d29044b1f8b080000000000040363606064606160650000de6f6b5c"
    "080000001f8b080000000000040363626066606360670000a163b9cb080000001f8b0800000000000403e360e0"
    "64e061e0650000e154b06e080000001f8b0800000000000403e362e066e063e06700009e5862f908000000";

Buffer ArangeWithHole() {
  Buffer b = Arange16();
  for (int r = 0; r < 2; ++r)
    for (int c = 2; c < 4; ++c) StoreLE16(b.data() + 2 * (4 * r + c), 0);
  return b;
}

TEST(ShardingCodec, MatchesTensorStoreShardWithMissingChunk) {
  ChunkSpec spec = MakeSpec(DType::kUInt16, {4, 4});
  auto codec = Parse(kTensorStoreConfig, spec);
  ASSERT_NE(codec, nullptr);
  Buffer shard = FromHex(kTensorStoreShard);
  auto dec = codec->Decode(spec, shard);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(*dec, ArangeWithHole());
  auto enc = codec->Encode(spec, ArangeWithHole());
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(ToHex(*enc), kTensorStoreShard);
  EXPECT_EQ(codec->ToJson(), (Json{{"name", "sharding_indexed"},
                                   {"configuration", ParseOrDie(kTensorStoreConfig)}}));
}

TEST(ShardingCodec, IndexHelpers) {
  ChunkSpec spec = MakeSpec(DType::kUInt16, {4, 4});
  auto codec = Parse(kTensorStoreConfig, spec);
  ASSERT_NE(codec, nullptr);
  EXPECT_EQ(codec->GridShape(spec), (Shape{2, 2}));
  EXPECT_EQ(codec->InnerSpec(spec).shape, (Shape{2, 2}));
  EXPECT_EQ(codec->EncodedIndexSize(spec), 16u * 4 + 4);
  EXPECT_EQ(codec->index_location(), ShardIndexLocation::kEnd);
  Buffer shard = FromHex(kTensorStoreShard);
  auto index_bytes = codec->IndexBytes(spec, shard);
  ASSERT_TRUE(index_bytes.ok());
  EXPECT_EQ(index_bytes->data(), shard.data() + shard.size() - 68);
  auto entries = codec->DecodeIndex(spec, *index_bytes);
  ASSERT_TRUE(entries.ok()) << entries.status().ToString();
  ASSERT_EQ(entries->size(), 4u);
  EXPECT_EQ((*entries)[0], (ShardIndexEntry{0, 8}));
  EXPECT_TRUE((*entries)[1].missing());
  EXPECT_EQ((*entries)[2], (ShardIndexEntry{8, 8}));
  EXPECT_EQ((*entries)[3], (ShardIndexEntry{16, 8}));
  EXPECT_TRUE(ValidateShardIndex(*entries, shard.size()).ok());
  // A ranged read of inner chunk 3 alone.
  auto inner = codec->inner_codecs().Decode(codec->InnerSpec(spec),
                                            ByteView(shard).subspan(16, 8));
  ASSERT_TRUE(inner.ok());
  EXPECT_EQ(LoadLE16(inner->data()), 10);
  EXPECT_EQ(LoadLE16(inner->data() + 6), 15);
}

TEST(ShardingCodec, MatchesTensorStoreIndexAtStart) {
  ChunkSpec spec = MakeSpec(DType::kUInt16, {4, 4});
  auto codec = Parse(kTensorStoreStartConfig, spec);
  ASSERT_NE(codec, nullptr);
  EXPECT_EQ(codec->index_location(), ShardIndexLocation::kStart);
  auto dec = codec->Decode(spec, FromHex(kTensorStoreStartShard));
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(*dec, Arange16());
  auto enc = codec->Encode(spec, Arange16());
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(ToHex(*enc), kTensorStoreStartShard);
  EXPECT_EQ(codec->ToJson()["configuration"], ParseOrDie(kTensorStoreStartConfig));
}

TEST(ShardingCodec, KeepsFillChunksWhenAsked) {
  ChunkSpec spec = MakeSpec(DType::kUInt16, {4, 4});
  auto codec = Parse(kTensorStoreConfig, spec);
  ASSERT_NE(codec, nullptr);
  EncodeOptions keep;
  keep.store_data_equal_to_fill_value = true;
  auto enc = codec->Encode(spec, ArangeWithHole(), keep);
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(enc->size(), 4u * 8 + 68);
  auto entries = codec->DecodeIndex(spec, *codec->IndexBytes(spec, *enc));
  ASSERT_TRUE(entries.ok());
  for (const auto& e : *entries) EXPECT_FALSE(e.missing());
  auto dec = codec->Decode(spec, *enc);
  ASSERT_TRUE(dec.ok());
  EXPECT_EQ(*dec, ArangeWithHole());
  // All fill, not kept: only the index, every entry missing.
  Buffer zeros(32);
  std::memset(zeros.data(), 0, 32);
  auto empty = codec->Encode(spec, zeros);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->size(), 68u);
}

TEST(ShardingCodec, MissingChunksReadAsFillValue) {
  ChunkSpec spec = MakeSpec(DType::kFloat32, {4, 6}, 0);
  const float fill = 1.5f;
  std::memcpy(spec.fill_value.data(), &fill, 4);
  auto codec = Parse(R"({"chunk_shape":[2,3],"codecs":[{"configuration":{"endian":"little"},)"
                     R"("name":"bytes"}],"index_codecs":[{"configuration":{"endian":"little"},)"
                     R"("name":"bytes"},{"name":"crc32c"}]})",
                     spec);
  ASSERT_NE(codec, nullptr);
  std::vector<float> data(24, fill);
  data[0] = 7;   // inner chunk 0
  data[23] = 9;  // inner chunk 3
  auto enc = codec->Encode(spec, ByteView(reinterpret_cast<uint8_t*>(data.data()), 96));
  ASSERT_TRUE(enc.ok());
  auto entries = codec->DecodeIndex(spec, *codec->IndexBytes(spec, *enc));
  ASSERT_TRUE(entries.ok());
  EXPECT_FALSE((*entries)[0].missing());
  EXPECT_TRUE((*entries)[1].missing());
  EXPECT_TRUE((*entries)[2].missing());
  EXPECT_FALSE((*entries)[3].missing());
  auto dec = codec->Decode(spec, *enc);
  ASSERT_TRUE(dec.ok());
  EXPECT_EQ(std::memcmp(dec->data(), data.data(), 96), 0);
}

TEST(ShardingCodec, RoundTripShapesDTypesAndNesting) {
  struct Case {
    DType dtype;
    Shape shard, inner;
    std::string inner_codecs;
  };
  const std::string le = R"({"configuration":{"endian":"little"},"name":"bytes"})";
  const std::string be = R"({"configuration":{"endian":"big"},"name":"bytes"})";
  const std::string zstd = R"({"configuration":{"checksum":false,"level":1},"name":"zstd"})";
  const std::string nested =
      R"({"configuration":{"chunk_shape":[2,2,2],"codecs":[)" + le + "," + zstd +
      R"(],"index_codecs":[)" + le + R"(,{"name":"crc32c"}]},"name":"sharding_indexed"})";
  std::vector<Case> cases = {
      {DType::kUInt8, {8, 8}, {8, 8}, R"([{"name":"bytes"}])"},
      {DType::kFloat32, {8, 8}, {2, 8}, "[" + le + "," + zstd + "]"},   // contiguous inner
      {DType::kFloat32, {8, 8}, {4, 2}, "[" + be + "]"},                // strided inner
      {DType::kBFloat16, {6, 4, 10}, {3, 2, 5},
       R"([{"configuration":{"order":[2,0,1]},"name":"transpose"},)" + le + "," + zstd + "]"},
      {DType::kComplex64, {4, 4, 4}, {4, 4, 4}, "[" + le + R"(,{"name":"crc32c"}])"},
      {DType::kInt16, {8, 4, 4}, {4, 4, 2}, "[" + nested + "]"},
  };
  for (const Case& c : cases) {
    ChunkSpec spec = MakeSpec(c.dtype, c.shard);
    Json config = {{"chunk_shape", c.inner},
                   {"codecs", ParseOrDie(c.inner_codecs)},
                   {"index_codecs", ParseOrDie("[" + le + R"(,{"name":"crc32c"}])")}};
    auto codec = ShardingCodec::FromJson(&config, spec);
    ASSERT_TRUE(codec.ok()) << codec.status().ToString();
    EXPECT_EQ((*codec)->ToJson()["configuration"], config);
    Buffer in = RandomBytes(spec.num_bytes(), 11, /*runs=*/true);
    auto enc = (*codec)->Encode(spec, in);
    ASSERT_TRUE(enc.ok()) << enc.status().ToString();
    EXPECT_LE(enc->size(), (*codec)->MaxEncodedSize(spec));
    auto dec = (*codec)->Decode(spec, *enc);
    ASSERT_TRUE(dec.ok()) << dec.status().ToString();
    EXPECT_EQ(*dec, in) << Json(c.shard).dump() << " " << c.inner_codecs;
  }
}

TEST(ShardingCodec, RejectsBadConfiguration) {
  ChunkSpec spec = MakeSpec(DType::kUInt16, {4, 4});
  const std::string le = R"({"configuration":{"endian":"little"},"name":"bytes"})";
  const std::string idx = R"("index_codecs":[)" + le + R"(,{"name":"crc32c"}])";
  for (const std::string& text : std::vector<std::string>{
           R"({"chunk_shape":[3,2],"codecs":[)" + le + "]," + idx + "}",
           R"({"chunk_shape":[2],"codecs":[)" + le + "]," + idx + "}",
           R"({"chunk_shape":[0,2],"codecs":[)" + le + "]," + idx + "}",
           R"({"chunk_shape":[2,2],)" + idx + "}",
           R"({"chunk_shape":[2,2],"codecs":[)" + le + "]}",
           R"({"codecs":[)" + le + "]," + idx + "}",
           R"({"chunk_shape":[2,2],"codecs":[)" + le + R"(],"index_codecs":[)" + le +
               R"(,{"configuration":{"level":1},"name":"gzip"}]})",
           R"({"chunk_shape":[2,2],"codecs":[)" + le + "]," + idx +
               R"(,"index_location":"middle"})",
           R"({"chunk_shape":[2,2],"codecs":[)" + le + "]," + idx + R"(,"x":1})",
           R"({"chunk_shape":[2,2],"codecs":[{"name":"crc32c"}],)" + idx + "}",
       }) {
    Json config = ParseOrDie(text);
    EXPECT_EQ(ShardingCodec::FromJson(&config, spec).status().code(),
              StatusCode::kInvalidArgument)
        << text;
  }
}

// Rewrites the (end-located, crc32c-protected) index of a 4-chunk shard.
Buffer WithIndex(ByteView shard, const std::vector<ShardIndexEntry>& entries) {
  Buffer out = Buffer::CopyOf(shard.first(shard.size() - 68));
  Buffer index(64);
  for (size_t i = 0; i < 4; ++i) {
    StoreLE64(index.data() + 16 * i, entries[i].offset);
    StoreLE64(index.data() + 16 * i + 8, entries[i].nbytes);
  }
  out.append(index.view());
  AppendLE32(&out, Crc32c(index.view()));
  return out;
}

TEST(ShardingCodec, CorruptShardsAreDataLoss) {
  ChunkSpec spec = MakeSpec(DType::kUInt16, {4, 4});
  auto codec = Parse(kTensorStoreConfig, spec);
  ASSERT_NE(codec, nullptr);
  Buffer shard = FromHex(kTensorStoreShard);
  const uint64_t m = ShardIndexEntry::kMissing;
  auto expect_loss = [&](ByteView bytes, const char* what) {
    auto dec = codec->Decode(spec, bytes);
    EXPECT_EQ(dec.status().code(), StatusCode::kDataLoss) << what;
  };
  // Sanity: re-indexing with the original entries decodes.
  ASSERT_TRUE(codec->Decode(spec, WithIndex(shard, {{0, 8}, {m, m}, {8, 8}, {16, 8}})).ok());
  expect_loss(WithIndex(shard, {{0, 8}, {m, m}, {8, 8}, {90, 8}}), "past the end of the shard");
  expect_loss(WithIndex(shard, {{0, 8}, {m, m}, {~uint64_t{0} - 4, 8}, {16, 8}}), "overflow");
  expect_loss(WithIndex(shard, {{0, 8}, {m, 8}, {8, 8}, {16, 8}}), "half-missing entry");
  expect_loss(WithIndex(shard, {{0, 7}, {m, m}, {8, 8}, {16, 8}}), "wrong inner size");
  expect_loss(ByteView(shard).first(60), "shorter than the index");
  for (size_t cut = 0; cut < shard.size(); ++cut) {
    auto dec = codec->Decode(spec, ByteView(shard).first(cut));
    EXPECT_EQ(dec.status().code(), StatusCode::kDataLoss) << "cut " << cut;
  }
  for (size_t i = shard.size() - 68; i < shard.size(); ++i) {
    Buffer bad = Buffer::CopyOf(shard.view());
    bad.data()[i] ^= 0x10;
    expect_loss(bad, "flipped index byte");
  }
  // Wrong index size passed to the helper.
  EXPECT_EQ(codec->DecodeIndex(spec, ByteView(shard).last(64)).status().code(),
            StatusCode::kDataLoss);
  EXPECT_EQ(ValidateShardIndex(std::vector<ShardIndexEntry>{{80, 20}}, 92).code(),
            StatusCode::kDataLoss);
}

TEST(ShardingCodec, CorruptCompressedInnerChunksNeverCrash) {
  ChunkSpec spec = MakeSpec(DType::kUInt16, {4, 4});
  auto codec = Parse(kTensorStoreStartConfig, spec);
  ASSERT_NE(codec, nullptr);
  Buffer shard = FromHex(kTensorStoreStartShard);
  for (size_t i = 0; i < shard.size(); ++i) {
    Buffer bad = Buffer::CopyOf(shard.view());
    bad.data()[i] ^= 0x81;
    auto dec = codec->Decode(spec, bad);
    if (!dec.ok()) {
      EXPECT_EQ(dec.status().code(), StatusCode::kDataLoss) << i;
    }
  }
}

}  // namespace
}  // namespace cairn

namespace cairn {
namespace {

TEST(ShardingCodec, OrbaxLayoutOneInnerChunkThenTwentyByteIndex) {
  // Orbax sets chunk_grid and sharding chunk_shape equal: the shard is one
  // zstd frame followed by the index (0, nbytes) and its CRC-32C.
  ChunkSpec spec = MakeSpec(DType::kBFloat16, {64, 96});
  auto codec = Parse(
      R"({"chunk_shape":[64,96],"codecs":[{"configuration":{"endian":"little"},"name":"bytes"},)"
      R"({"configuration":{"checksum":false,"level":3},"name":"zstd"}],"index_codecs":[)"
      R"({"configuration":{"endian":"little"},"name":"bytes"},{"name":"crc32c"}]})",
      spec);
  ASSERT_NE(codec, nullptr);
  Buffer in = RandomBytes(spec.num_bytes(), 21, /*runs=*/true);
  auto enc = codec->Encode(spec, in);
  ASSERT_TRUE(enc.ok());
  ASSERT_GT(enc->size(), 20u);
  const size_t data_size = enc->size() - 20;
  EXPECT_EQ(LoadLE32(enc->data()), 0xFD2FB528u);  // zstd magic at offset 0
  EXPECT_EQ(LoadLE64(enc->data() + data_size), 0u);
  EXPECT_EQ(LoadLE64(enc->data() + data_size + 8), data_size);
  EXPECT_EQ(LoadLE32(enc->data() + data_size + 16),
            Crc32c(ByteView(enc->data() + data_size, 16)));
  auto dec = codec->Decode(spec, *enc);
  ASSERT_TRUE(dec.ok());
  EXPECT_EQ(*dec, in);
}

}  // namespace
}  // namespace cairn
