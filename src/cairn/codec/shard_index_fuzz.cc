// libFuzzer target for reading `sharding_indexed` shards: the shard index
// and the inner chunks it points at.
//
// The first input byte picks one of a few shard configurations (index at the
// start or end, with or without crc32c, nested inner codecs: bytes, zstd,
// gzip, a nested shard); the rest is the stored shard. It is decoded whole
// (the codec chain's Decode) and through the ranged-read helpers
// (IndexBytes, DecodeIndex, ValidateShardIndex). When the index carries a
// crc32c, the shard is decoded again with the checksum recomputed so that
// mutations reach the entries instead of stopping at the checksum.
// Decoding must return a Status, never crash, assert or allocate more than
// the shard's decoded size; any other outcome is a finding.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cairn/codec/codec.h"
#include "cairn/codec/sharding_codec.h"
#include "cairn/util/crc32c.h"
#include "cairn/util/json.h"

namespace {

using namespace cairn;

struct Config {
  ChunkSpec spec;
  CodecChain chain;
  const ShardingCodec* sharding = nullptr;
  bool crc = false;
  bool at_start = false;
};

std::vector<Config> MakeConfigs() {
#define CAIRN_LE R"({"name":"bytes","configuration":{"endian":"little"}})"
#define CAIRN_CRC_INDEX R"("index_codecs":[)" CAIRN_LE R"(,{"name":"crc32c"}])"
  const char* kShards[] = {
      // crc32c index at the end, zstd inner chunks
      R"([{"name":"sharding_indexed","configuration":{"chunk_shape":[4,4],"codecs":[)" CAIRN_LE
      R"(,{"name":"zstd","configuration":{"level":1,"checksum":false}}],)" CAIRN_CRC_INDEX
      R"(,"index_location":"end"}}])",
      // index at the start without a checksum, raw inner chunks
      R"([{"name":"sharding_indexed","configuration":{"chunk_shape":[2,8],"codecs":[)" CAIRN_LE
      R"(],"index_codecs":[)" CAIRN_LE R"(],"index_location":"start"}}])",
      // gzip inner chunks, big-endian, crc32c index at the start
      R"([{"name":"sharding_indexed","configuration":{"chunk_shape":[8,2],)"
      R"("codecs":[{"name":"bytes","configuration":{"endian":"big"}},)"
      R"({"name":"gzip","configuration":{"level":1}}],)" CAIRN_CRC_INDEX
      R"(,"index_location":"start"}}])",
      // a shard of shards
      R"([{"name":"sharding_indexed","configuration":{"chunk_shape":[4,8],)"
      R"("codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[2,2],)"
      R"("codecs":[)" CAIRN_LE R"(],)" CAIRN_CRC_INDEX R"(,"index_location":"end"}}],)"
      CAIRN_CRC_INDEX R"(,"index_location":"end"}}])",
  };
#undef CAIRN_CRC_INDEX
#undef CAIRN_LE
  std::vector<Config> configs;
  for (const char* text : kShards) {
    Config c;
    c.spec = ChunkSpec{DType::kUInt16, {8, 8}, {0x2a, 0x00}};
    auto json = ParseJson(text, "fuzz shard config");
    if (!json.ok()) __builtin_trap();
    auto chain = CodecChain::FromJson(*json, c.spec);
    if (!chain.ok()) {
      std::fprintf(stderr, "bad fuzz config %s: %s\n", text, chain.status().ToString().c_str());
      __builtin_trap();
    }
    c.chain = *std::move(chain);
    c.sharding = dynamic_cast<const ShardingCodec*>(c.chain.array_to_bytes().get());
    if (c.sharding == nullptr) __builtin_trap();
    const std::string dumped = json->dump();
    c.crc = dumped.find("crc32c") != std::string::npos;
    c.at_start = c.sharding->index_location() == ShardIndexLocation::kStart;
    configs.push_back(std::move(c));
  }
  return configs;
}

void DecodeShard(const Config& c, ByteView shard) {
  auto whole = c.chain.Decode(c.spec, shard);
  if (whole.ok() && whole->size() != c.spec.num_bytes()) __builtin_trap();
  auto index = c.sharding->IndexBytes(c.spec, shard);
  if (!index.ok()) return;
  auto entries = c.sharding->DecodeIndex(c.spec, *index);
  if (!entries.ok()) return;
  if (ValidateShardIndex(*entries, shard.size()).ok()) {
    for (const ShardIndexEntry& e : *entries) {
      if (!e.missing() && (e.offset > shard.size() || e.nbytes > shard.size() - e.offset)) {
        __builtin_trap();  // validated, yet out of bounds
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<Config>* configs = new std::vector<Config>(MakeConfigs());
  if (size == 0) return 0;
  const Config& c = (*configs)[data[0] % configs->size()];
  const ByteView shard(data + 1, size - 1);
  DecodeShard(c, shard);
  const uint64_t index_size = c.sharding->EncodedIndexSize(c.spec);
  if (c.crc && shard.size() >= index_size && index_size >= 4) {
    std::vector<uint8_t> fixed(shard.begin(), shard.end());
    uint8_t* index = fixed.data() + (c.at_start ? 0 : fixed.size() - index_size);
    const uint32_t crc = Crc32c(ByteView(index, index_size - 4));
    std::memcpy(index + index_size - 4, &crc, 4);  // little-endian hosts
    DecodeShard(c, ByteView(fixed.data(), fixed.size()));
  }
  return 0;
}
