// Chunks whose stored bytes are valid in the destination (the same grid,
// dtype and a codec chain it reads as such: zarr/stored_chunk.h) are copied
// as stored, not decoded and encoded again.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "cairn/engine/convert/convert.h"
#include "cairn/engine/convert/convert_checkpoint.h"
#include "cairn/engine/testing/random_data.h"
#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/kvstore/url.h"
#include "cairn/layout/axlearn/axlearn_checkpoint.h"
#include "cairn/zarr/stored_chunk.h"

namespace cairn::engine {
namespace {

using layout::ArrayInfo;

// One float32 array of 2 MiB in 8 chunks of 256 KiB (zstd level 1).
std::vector<uint8_t> WriteSource(const std::shared_ptr<KvStore>& store, const std::string& prefix) {
  const std::vector<ArrayInfo> arrays = {
      ArrayInfo{"w", DType::kFloat32, {512, 1024}, {64, 1024}, 0, {"w"}, {}}};
  auto data = testing::RandomFloatBytes(512 * 1024, 3);
  axlearn::WriterOptions o;
  o.step = 1;
  auto writer = axlearn::CreateWriter(store, prefix, arrays, o);
  EXPECT_TRUE(writer.ok()) << writer.status().ToString();
  EXPECT_TRUE((*writer)->WriteBox("w", Box::FromShape({512, 1024}), data.data()).ok());
  EXPECT_TRUE((*writer)->Commit().ok());
  return data;
}

Result<ConvertStats> ToAxlearn(layout::CheckpointReader& source, const std::shared_ptr<KvStore>& store,
                               const std::string& dest, ConvertOptions options = {}) {
  options.plan.dest_separator = '/';
  options.threads = 3;
  auto make = [&](const std::vector<ArrayInfo>& planned)
      -> Result<std::unique_ptr<layout::CheckpointWriter>> {
    CAIRN_ASSIGN_OR_RETURN(auto w, axlearn::CreateWriter(store, dest, planned, {}));
    return std::unique_ptr<layout::CheckpointWriter>(std::move(w));
  };
  return Convert(source, make, [&] { return axlearn::OpenReader(store, dest); }, options);
}

std::vector<uint8_t> ReadAll(const std::shared_ptr<KvStore>& store, const std::string& step) {
  auto out = axlearn::OpenReader(store, step);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  std::vector<uint8_t> got(512 * 1024 * 4);
  if (out.ok()) EXPECT_TRUE((*out)->ReadBox("w", Box::FromShape({512, 1024}), got.data()).ok());
  return got;
}

TEST(ConvertStored, ChunksOfTheSameFormPassAsStored) {
  auto store = std::make_shared<MemoryKvStore>();
  const auto data = WriteSource(store, "src");
  auto source = axlearn::OpenReader(store, "src");
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  EXPECT_EQ((*source)->StoredChunkForm("w"), "zstd float32 [64, 1024]");
  ConvertOptions options;
  options.verify = true;  // what was stored reads back as the source
  auto stats = ToAxlearn(**source, store, "dst", options);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->chunks_copied_stored, 8u);
  EXPECT_TRUE(ReadAll(store, "dst") == data);
  // Each chunk is the source's stored bytes, as they are.
  auto keys = store->List("src/gda/w/");
  ASSERT_TRUE(keys.ok());
  uint64_t stored = 0;
  for (const KeyInfo& k : *keys) {
    if (k.key.find(".zarray") != std::string::npos) continue;
    stored += k.size;
    const std::string name = k.key.substr(std::string("src/gda/w/").size());
    EXPECT_EQ(store->Get("dst/gda/w/" + name)->value().ToString(), store->Get(k.key)->value().ToString())
        << name;
  }
  EXPECT_EQ(stats->bytes_read, stored);
  // A cast changes the form: decoded, cast, encoded.
  ConvertOptions cast;
  cast.plan.casts = {{"w", DType::kBFloat16}};
  auto casted = ToAxlearn(**source, store, "bf16", cast);
  ASSERT_TRUE(casted.ok()) << casted.status().ToString();
  EXPECT_EQ(casted->chunks_copied_stored, 0u);
}

TEST(ConvertStored, AChunkThatFailsTheCheapChecksIsDecodedAndItsDamageReported) {
  auto store = std::make_shared<MemoryKvStore>();
  WriteSource(store, "src");
  // A truncated frame: not passed along (it no longer declares a whole
  // frame), so decoding names the chunk.
  auto chunk = store->Get("src/gda/w/3.0");
  ASSERT_TRUE(chunk.ok() && chunk->has_value());
  const std::string bytes = (*chunk)->ToString();
  ASSERT_TRUE(store->Put("src/gda/w/3.0", AsBytes(bytes.substr(0, bytes.size() / 2))).ok());
  auto source = axlearn::OpenReader(store, "src");
  ASSERT_TRUE(source.ok());
  auto stats = ToAxlearn(**source, store, "dst");
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().code(), StatusCode::kDataLoss) << stats.status().ToString();
  EXPECT_NE(stats.status().ToString().find("3.0"), std::string::npos) << stats.status().ToString();
  EXPECT_FALSE(store->Get("dst/index")->has_value());
}

// Orbax (OCDBT + zarr v3, zstd) to AXLearn (zarr v2, zstd compressor): the
// v3 chunks (inside shards of one inner chunk) are valid v2 chunks.
TEST(ConvertStored, OrbaxZarr3ChunksPassAsAxlearnZarr2Chunks) {
  const std::string dir = std::filesystem::temp_directory_path() /
                          ("cairn_stored_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto store = *OpenKvStore("memory://stored_orbax/");
  const auto data = WriteSource(store, "axl/step_00000001");
  ConvertCheckpointRequest to_orbax;
  to_orbax.source = "memory://stored_orbax/axl/";
  to_orbax.dest = dir;
  to_orbax.to = "orbax";
  auto orbax = ConvertCheckpoint(to_orbax);
  ASSERT_TRUE(orbax.ok()) << orbax.status().ToString();
  ConvertCheckpointRequest back;
  back.source = dir;
  back.dest = "memory://stored_orbax/back/";
  back.to = "axlearn";
  back.options.verify = true;
  auto result = ConvertCheckpoint(back);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->source_format, "orbax");
  EXPECT_EQ(result->stats.chunks_copied_stored, 8u);
  EXPECT_TRUE(ReadAll(store, "back/step_00000001") == data);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cairn::engine
