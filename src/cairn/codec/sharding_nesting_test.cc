// sharding_indexed nested inside itself (docs/limits.md): up to
// ShardingCodec::kMaxNesting levels parse and round-trip; one more is
// InvalidArgument, and so is a chain ten thousand levels deep (which
// overflowed the stack before the limit; run in a child process).
#include <gtest/gtest.h>

#include <string>

#include "cairn/codec/codec_test_util.h"
#include "cairn/codec/sharding_codec.h"
#include "cairn/util/testing/in_subprocess.h"

namespace cairn {
namespace {

using codec_test::MakeSpec;
using codec_test::RandomBytes;

Json LittleEndianBytes() { return {{"name", "bytes"}, {"configuration", {{"endian", "little"}}}}; }

Json IndexCodecs() { return Json::array({LittleEndianBytes(), {{"name", "crc32c"}}}); }

// chunk_shape of the sharding codec at nesting `level` (1 = outermost) of
// a chain over [4, 4] shards. Nested in `codecs`, every level sees [2, 2]
// chunks. Nested in `index_codecs`, a level's shard is the index of the one
// above (its grid plus a dimension of 2), so the rank grows by one per level:
// [2, 2], then [2, 2, 2], then [1, 1, 1, 2], [1, 1, 1, 1, 2], ... Levels past 10 are never
// parsed (the limit stops at 9), so they stay small.
Json ChunkShape(int level, bool via_index) {
  if (!via_index || level == 1 || level > 10) return {2, 2};
  if (level == 2) return {2, 2, 2};
  std::vector<int> shape(static_cast<size_t>(level), 1);  // level 3: [1, 1, 1, 2]
  shape.push_back(2);
  return shape;
}

// The configuration of a sharding codec with `levels` sharding codecs in
// all (itself included), each nested in the `codecs` (or, with `via_index`,
// the `index_codecs`) of the one above. Built with moves only: copying a
// Json recurses once per level.
Json NestedConfig(int levels, bool via_index = false) {
  auto config_at = [via_index](int level, Json nested) {
    Json config = Json::object();
    config["chunk_shape"] = ChunkShape(level, via_index);
    config["codecs"] = via_index ? Json::array({LittleEndianBytes()}) : std::move(nested);
    config["index_codecs"] = via_index ? std::move(nested) : IndexCodecs();
    return config;
  };
  Json codecs = via_index ? IndexCodecs() : Json::array({LittleEndianBytes()});
  for (int level = levels; level > 1; --level) {
    Json codec = Json::object();
    codec["name"] = "sharding_indexed";
    codec["configuration"] = config_at(level, std::move(codecs));
    codecs = Json::array();
    codecs.push_back(std::move(codec));
  }
  return config_at(1, std::move(codecs));
}

::testing::AssertionResult IsNestingError(const Status& s) {
  if (s.code() != StatusCode::kInvalidArgument) return ::testing::AssertionFailure() << s.ToString();
  if (s.message().find("sharding_indexed: nested more than 8 levels deep") == std::string_view::npos) {
    return ::testing::AssertionFailure() << s.message();
  }
  return ::testing::AssertionSuccess();
}

TEST(ShardingNesting, EightLevelsRoundTrip) {
  const ChunkSpec spec = MakeSpec(DType::kUInt16, {4, 4});
  Json config = NestedConfig(ShardingCodec::kMaxNesting);
  auto codec = ShardingCodec::FromJson(&config, spec);
  ASSERT_TRUE(codec.ok()) << codec.status().ToString();
  Buffer in = RandomBytes(spec.num_bytes(), 3);
  auto enc = (*codec)->Encode(spec, in);
  ASSERT_TRUE(enc.ok()) << enc.status().ToString();
  auto dec = (*codec)->Decode(spec, *enc);
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  EXPECT_EQ(*dec, in);
  // The depth counter is back at zero after success and after failure.
  Json nine = NestedConfig(ShardingCodec::kMaxNesting + 1);
  EXPECT_FALSE(ShardingCodec::FromJson(&nine, spec).ok());
  EXPECT_TRUE(ShardingCodec::FromJson(&config, spec).ok());
}

TEST(ShardingNesting, NineLevelsAreInvalidArgument) {
  const ChunkSpec spec = MakeSpec(DType::kUInt16, {4, 4});
  Json nine = NestedConfig(ShardingCodec::kMaxNesting + 1);
  EXPECT_TRUE(IsNestingError(ShardingCodec::FromJson(&nine, spec).status()));
  // Through index_codecs too (rejected there later anyway, as not fixed-size).
  Json nine_index = NestedConfig(ShardingCodec::kMaxNesting + 1, /*via_index=*/true);
  EXPECT_TRUE(IsNestingError(ShardingCodec::FromJson(&nine_index, spec).status()));
  // Through a whole codec chain, as zarr metadata reaches it.
  Json chain = Json::array();
  chain.push_back({{"name", "sharding_indexed"}, {"configuration", std::move(nine)}});
  EXPECT_TRUE(IsNestingError(CodecChain::FromJson(chain, spec).status()));
}

TEST(ShardingNesting, TenThousandLevelsFailWithoutCrashing) {
  CAIRN_EXPECT_IN_SUBPROCESS([] {
    Json deep = NestedConfig(10'000);
    return IsNestingError(ShardingCodec::FromJson(&deep, MakeSpec(DType::kUInt16, {4, 4})).status());
  });
  CAIRN_EXPECT_IN_SUBPROCESS([] {
    Json deep = NestedConfig(10'000, /*via_index=*/true);
    return IsNestingError(ShardingCodec::FromJson(&deep, MakeSpec(DType::kUInt16, {4, 4})).status());
  });
}

}  // namespace
}  // namespace cairn
