#include <gtest/gtest.h>

#include "cairn/codec/codec.h"
#include "cairn/codec/codec_test_util.h"
#include "cairn/codec/registry.h"
#include "cairn/util/coding.h"
#include "cairn/util/json.h"

namespace cairn {
namespace {

using codec_test::FromHex;
using codec_test::MakeSpec;
using codec_test::ParseOrDie;
using codec_test::RandomBytes;
using codec_test::ToHex;

// `codecs` lists exactly as TensorStore 0.1.86 wrote them in zarr.json.
struct Observed {
  DType dtype;
  Shape chunk;
  const char* codecs;
};
const Observed kObserved[] = {
    {DType::kFloat32, {4, 4}, R"([{"configuration":{"endian":"little"},"name":"bytes"}])"},
    {DType::kUInt8, {4, 4}, R"([{"name":"bytes"}])"},
    {DType::kFloat32, {4, 4},
     R"([{"configuration":{"order":[1,0]},"name":"transpose"},)"
     R"({"configuration":{"endian":"little"},"name":"bytes"}])"},
    {DType::kFloat32, {4, 4},
     R"([{"configuration":{"endian":"little"},"name":"bytes"},)"
     R"({"configuration":{"checksum":false,"level":3},"name":"zstd"}])"},
    {DType::kFloat32, {4, 4},
     R"([{"configuration":{"endian":"little"},"name":"bytes"},)"
     R"({"configuration":{"checksum":true,"level":5},"name":"zstd"}])"},
    {DType::kFloat32, {4, 4},
     R"([{"configuration":{"endian":"little"},"name":"bytes"},)"
     R"({"configuration":{"level":6},"name":"gzip"}])"},
    {DType::kFloat32, {4, 4},
     R"([{"configuration":{"endian":"little"},"name":"bytes"},{"configuration":{"blocksize":0,)"
     R"("clevel":5,"cname":"lz4","shuffle":"shuffle","typesize":4},"name":"blosc"}])"},
    {DType::kUInt8, {4, 4},
     R"([{"name":"bytes"},{"configuration":{"blocksize":0,"clevel":5,"cname":"lz4",)"
     R"("shuffle":"bitshuffle","typesize":1},"name":"blosc"}])"},
    {DType::kFloat32, {4, 4},
     R"([{"configuration":{"endian":"little"},"name":"bytes"},{"configuration":{"blocksize":0,)"
     R"("clevel":3,"cname":"zstd","shuffle":"noshuffle"},"name":"blosc"}])"},
    {DType::kFloat32, {4, 4},
     R"([{"configuration":{"endian":"little"},"name":"bytes"},{"name":"crc32c"}])"},
    {DType::kUInt16, {4, 4},
     R"([{"configuration":{"chunk_shape":[2,2],"codecs":[{"configuration":{"endian":"little"},)"
     R"("name":"bytes"}],"index_codecs":[{"configuration":{"endian":"little"},"name":"bytes"},)"
     R"({"name":"crc32c"}]},"name":"sharding_indexed"}])"},
    // What Orbax writes for a bfloat16 [4096, 11008] array: one shard per
    // chunk, zstd level 3 inner chunks, crc32c index.
    {DType::kBFloat16, {4096, 11008},
     R"([{"configuration":{"chunk_shape":[4096,11008],"codecs":[{"configuration":{"endian":)"
     R"("little"},"name":"bytes"},{"configuration":{"checksum":false,"level":3},"name":"zstd"}],)"
     R"("index_codecs":[{"configuration":{"endian":"little"},"name":"bytes"},{"name":"crc32c"}]},)"
     R"("name":"sharding_indexed"}])"},
};

TEST(CodecChain, JsonRoundTripIsExactlyTensorStores) {
  for (const Observed& o : kObserved) {
    ChunkSpec spec = MakeSpec(o.dtype, o.chunk);
    auto chain = CodecChain::FromJson(ParseOrDie(o.codecs), spec);
    ASSERT_TRUE(chain.ok()) << o.codecs << ": " << chain.status().ToString();
    EXPECT_EQ(DumpJson(chain->ToJson()), o.codecs);
  }
}

TEST(CodecChain, RoundTripEveryObservedChain) {
  for (const Observed& o : kObserved) {
    if (NumElements(o.chunk) > 1000) continue;
    ChunkSpec spec = MakeSpec(o.dtype, o.chunk);
    auto chain = CodecChain::FromJson(ParseOrDie(o.codecs), spec);
    ASSERT_TRUE(chain.ok());
    Buffer in = RandomBytes(spec.num_bytes(), 3);
    auto enc = chain->Encode(spec, in);
    ASSERT_TRUE(enc.ok()) << o.codecs;
    EXPECT_LE(enc->size(), chain->MaxEncodedSize(spec));
    auto dec = chain->Decode(spec, *enc);
    ASSERT_TRUE(dec.ok()) << o.codecs << ": " << dec.status().ToString();
    EXPECT_EQ(*dec, in) << o.codecs;
  }
}

TEST(CodecChain, DecodesTensorStoreBigEndianTransposedChunk) {
  // TensorStore 0.1.86: uint16 [4,4] = arange(16), codecs transpose [1,0],
  // bytes big, crc32c.
  ChunkSpec spec = MakeSpec(DType::kUInt16, {4, 4});
  auto chain = CodecChain::FromJson(
      ParseOrDie(R"([{"configuration":{"order":[1,0]},"name":"transpose"},)"
                 R"({"configuration":{"endian":"big"},"name":"bytes"},{"name":"crc32c"}])"),
      spec);
  ASSERT_TRUE(chain.ok()) << chain.status().ToString();
  const std::string stored =
      "000000040008000c000100050009000d00020006000a000e00030007000b000f4911a46f";
  auto dec = chain->Decode(spec, FromHex(stored));
  ASSERT_TRUE(dec.ok()) << dec.status().ToString();
  for (int i = 0; i < 16; ++i) EXPECT_EQ(LoadLE16(dec->data() + 2 * i), i);
  auto enc = chain->Encode(spec, *dec);
  ASSERT_TRUE(enc.ok());
  EXPECT_EQ(ToHex(*enc), stored);
}

TEST(CodecChain, IdentityChainAndFillCheck) {
  ChunkSpec spec = MakeSpec(DType::kFloat32, {8});
  auto chain = CodecChain::FromJson(
      ParseOrDie(R"([{"configuration":{"endian":"little"},"name":"bytes"}])"), spec);
  ASSERT_TRUE(chain.ok());
  EXPECT_TRUE(chain->IsIdentity(spec));
  Buffer zeros(32);
  std::memset(zeros.data(), 0, 32);
  EXPECT_TRUE(IsFillValue(spec, zeros));
  zeros.data()[31] = 1;
  EXPECT_FALSE(IsFillValue(spec, zeros));
  ChunkSpec odd = MakeSpec(DType::kUInt16, {3});
  odd.fill_value = {1, 2};
  const uint8_t same[] = {1, 2, 1, 2, 1, 2};
  const uint8_t differ[] = {1, 2, 1, 2, 2, 1};
  EXPECT_TRUE(IsFillValue(odd, ByteView(same, 6)));
  EXPECT_FALSE(IsFillValue(odd, ByteView(differ, 6)));
  // Encoding a wrongly sized array is an error, not a crash.
  EXPECT_EQ(chain->Encode(spec, ByteView(same, 6)).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(CodecChain, ChecksummedIdentityIsTheElementsThenTheirCrc32c) {
  ChunkSpec spec = MakeSpec(DType::kFloat32, {8});
  auto chain_of = [&](const char* json) { return CodecChain::FromJson(ParseOrDie(json), spec); };
  auto plain = chain_of(R"([{"configuration":{"endian":"little"},"name":"bytes"}])");
  auto crc = chain_of(R"([{"configuration":{"endian":"little"},"name":"bytes"},{"name":"crc32c"}])");
  auto twice = chain_of(R"([{"configuration":{"endian":"little"},"name":"bytes"},{"name":"crc32c"},)"
                        R"({"name":"crc32c"}])");
  auto zstd = chain_of(R"([{"configuration":{"endian":"little"},"name":"bytes"},)"
                       R"({"configuration":{"checksum":true,"level":3},"name":"zstd"}])");
  ASSERT_TRUE(plain.ok() && crc.ok() && twice.ok() && zstd.ok());
  EXPECT_EQ(plain->ChecksummedIdentityTrailer(spec), std::optional<uint64_t>(0));
  EXPECT_EQ(crc->ChecksummedIdentityTrailer(spec), std::optional<uint64_t>(4));
  EXPECT_FALSE(twice->ChecksummedIdentityTrailer(spec).has_value());
  EXPECT_FALSE(zstd->ChecksummedIdentityTrailer(spec).has_value());
  const Buffer elements = RandomBytes(32, 7);
  auto stored = crc->Encode(spec, elements.view());
  ASSERT_TRUE(stored.ok());
  ASSERT_EQ(stored->size(), 36u);
  EXPECT_EQ(std::memcmp(stored->data(), elements.data(), 32), 0) << "the elements start the value";
  EXPECT_TRUE(crc->VerifyChecksummedIdentity(spec, stored->view()).ok());
  for (size_t at : {size_t{0}, size_t{17}, size_t{31}, size_t{34}}) {
    Buffer flipped = Buffer::CopyOf(stored->view());
    flipped.data()[at] ^= 0x01;
    const Status s = crc->VerifyChecksummedIdentity(spec, flipped.view());
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << "byte " << at;
    EXPECT_NE(s.ToString().find("crc32c mismatch"), std::string::npos) << s.ToString();
  }
  EXPECT_EQ(crc->VerifyChecksummedIdentity(spec, stored->view().first(35)).code(), StatusCode::kDataLoss);
}

TEST(CodecChain, RejectsInvalidChains) {
  ChunkSpec spec = MakeSpec(DType::kFloat32, {4, 4});
  const std::string le = R"({"configuration":{"endian":"little"},"name":"bytes"})";
  const std::string tr = R"({"configuration":{"order":[1,0]},"name":"transpose"})";
  const std::string crc = R"({"name":"crc32c"})";
  struct Bad {
    std::string json;
    std::string message;
  };
  for (const Bad& b : std::vector<Bad>{
           {R"([{"name":"foo"}])", "unknown codec `foo`"},
           {"[" + le + R"(,"crc32c"])", "expected an object"},
           {"[]", "no array->bytes codec"},
           {"[" + crc + "]", "before any array->bytes codec"},
           {"[" + le + "," + le + "]", "second array->bytes codec"},
           {"[" + le + "," + tr + "]", "after the array->bytes codec"},
           {"[" + tr + "]", "no array->bytes codec"},
           {R"({"name":"bytes"})", "expected a list"},
           {R"([{"name":"bytes","configuration":{"endian":"little"},"extra":1}])",
            "unknown member"},
           {R"([{"name":"bytes","configuration":[1]}])", "must be an object"},
           {R"([{"name":5}])", "expected a string"},
           {R"([{"name":"bytes"}])", "endian"},
           {"[" + le + R"(,{"name":"zstd"}])", "level"},
       }) {
    auto chain = CodecChain::FromJson(ParseOrDie(b.json), spec);
    ASSERT_EQ(chain.status().code(), StatusCode::kInvalidArgument) << b.json;
    EXPECT_NE(chain.status().message().find(b.message), std::string::npos)
        << b.json << " -> " << chain.status().ToString();
  }
}

TEST(CodecChain, DecodeBoundsCompressedOutputBySpec) {
  // A zstd frame of 1 MiB cannot be a 64-byte chunk: rejected without
  // decoding it all.
  ChunkSpec spec = MakeSpec(DType::kFloat32, {16});
  auto chain = CodecChain::FromJson(
      ParseOrDie(R"([{"configuration":{"endian":"little"},"name":"bytes"},)"
                 R"({"configuration":{"checksum":false,"level":3},"name":"zstd"}])"),
      spec);
  ASSERT_TRUE(chain.ok());
  ChunkSpec big = MakeSpec(DType::kFloat32, {1 << 18});
  Buffer zeros(big.num_bytes());
  std::memset(zeros.data(), 0, zeros.size());
  auto bomb = chain->Encode(big, zeros);
  ASSERT_TRUE(bomb.ok());
  EXPECT_EQ(chain->Decode(spec, *bomb).status().code(), StatusCode::kDataLoss);
}

// A chunk that compresses far more than 64x (a zstd frame may claim a size
// its bytes could not plausibly produce, so the codec alone grows its
// output in steps there) is decoded in one shot into a buffer of the
// chunk's size, taken from the spec: the only large allocation. Before,
// the steps allocated about twice the chunk. A frame cut short still
// fails as DataLoss, having allocated no more than the chunk.
TEST(CodecChain, HighlyCompressedChunkDecodesIntoOneBufferOfTheChunk) {
  ChunkSpec spec = MakeSpec(DType::kFloat32, {1 << 22});  // 16 MiB
  auto chain = CodecChain::FromJson(
      ParseOrDie(R"([{"configuration":{"endian":"little"},"name":"bytes"},)"
                 R"({"configuration":{"checksum":false,"level":1},"name":"zstd"}])"),
      spec);
  ASSERT_TRUE(chain.ok());
  Buffer values(spec.num_bytes());
  for (size_t i = 0; i < values.size(); ++i) values.data()[i] = static_cast<uint8_t>(i / 4096);
  auto frame = chain->Encode(spec, values);
  ASSERT_TRUE(frame.ok());
  ASSERT_LT(frame->size() * 1000, spec.num_bytes());  // compresses over 1000x
  const uint64_t before = Buffer::TotalBytesAllocated();
  auto decoded = chain->Decode(spec, *frame);
  const uint64_t allocated = Buffer::TotalBytesAllocated() - before;
  ASSERT_TRUE(decoded.ok()) << decoded.status().ToString();
  EXPECT_TRUE(*decoded == values);
  EXPECT_LE(allocated, spec.num_bytes() + (64 << 10));
  const uint64_t cut_before = Buffer::TotalBytesAllocated();
  auto cut = chain->Decode(spec, frame->view().first(frame->size() - 8));
  EXPECT_EQ(cut.status().code(), StatusCode::kDataLoss);
  EXPECT_LE(Buffer::TotalBytesAllocated() - cut_before, spec.num_bytes() + (64 << 10));
}

TEST(CodecChain, CorruptInputNeverCrashes) {
  for (const Observed& o : kObserved) {
    if (NumElements(o.chunk) > 1000) continue;
    ChunkSpec spec = MakeSpec(o.dtype, o.chunk);
    auto chain = CodecChain::FromJson(ParseOrDie(o.codecs), spec);
    ASSERT_TRUE(chain.ok());
    auto enc = chain->Encode(spec, RandomBytes(spec.num_bytes(), 4, true));
    ASSERT_TRUE(enc.ok());
    for (size_t cut = 0; cut < enc->size(); ++cut) {
      auto dec = chain->Decode(spec, enc->view().first(cut));
      if (!dec.ok()) {
        EXPECT_EQ(dec.status().code(), StatusCode::kDataLoss) << o.codecs << " cut " << cut;
      } else {
        EXPECT_EQ(dec->size(), spec.num_bytes());
      }
    }
  }
}

// DecodeInto writes what Decode returns, for every observed chain (zstd
// straight into the output, the others through a buffer), and fails where
// Decode fails on corrupt input, with DataLoss.
TEST(CodecChain, DecodeIntoAgreesWithDecode) {
  for (const Observed& o : kObserved) {
    if (NumElements(o.chunk) > 1000) continue;
    ChunkSpec spec = MakeSpec(o.dtype, o.chunk);
    auto chain = CodecChain::FromJson(ParseOrDie(o.codecs), spec);
    ASSERT_TRUE(chain.ok());
    Buffer in = RandomBytes(spec.num_bytes(), 7, true);
    auto enc = chain->Encode(spec, in);
    ASSERT_TRUE(enc.ok()) << o.codecs;
    Buffer out(spec.num_bytes());
    ASSERT_TRUE(chain->DecodeInto(spec, *enc, out.mutable_view()).ok()) << o.codecs;
    EXPECT_EQ(out, in) << o.codecs;
    Buffer wrong(spec.num_bytes() + 1);
    EXPECT_EQ(chain->DecodeInto(spec, *enc, wrong.mutable_view()).code(), StatusCode::kInvalidArgument);
    for (size_t cut = 0; cut < enc->size(); ++cut) {
      auto dec = chain->Decode(spec, enc->view().first(cut));
      const bool decode_ok = dec.ok() && dec->size() == spec.num_bytes();
      Status into = chain->DecodeInto(spec, enc->view().first(cut), out.mutable_view());
      EXPECT_EQ(into.ok(), decode_ok) << o.codecs << " cut " << cut << ": " << into.ToString();
      if (!into.ok()) {
        EXPECT_EQ(into.code(), StatusCode::kDataLoss) << o.codecs << " cut " << cut;
      } else {
        EXPECT_EQ(out, *dec) << o.codecs << " cut " << cut;
      }
    }
  }
}

TEST(Registry, ListsEveryCodecOnce) {
  std::vector<std::string_view> names;
  for (const auto& r : RegisteredCodecs()) names.push_back(r.name);
  EXPECT_EQ(names, (std::vector<std::string_view>{"transpose", "bytes", "sharding_indexed",
                                                  "zstd", "gzip", "blosc", "crc32c"}));
  ASSERT_NE(FindCodec("zstd"), nullptr);
  EXPECT_EQ(FindCodec("zstd")->kind, CodecKind::kBytesToBytes);
  EXPECT_EQ(FindCodec("transpose")->kind, CodecKind::kArrayToArray);
  EXPECT_EQ(FindCodec("sharding_indexed")->kind, CodecKind::kArrayToBytes);
  EXPECT_EQ(FindCodec("zlib"), nullptr);  // zarr v2 only
  EXPECT_EQ(FindCodec("packbits"), nullptr);
}

}  // namespace
}  // namespace cairn
