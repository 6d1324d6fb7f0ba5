// The front door's one parser per option: every spelling any earlier copy
// accepted (the Python binding's "zstd", the CLI demo's lower-case units,
// convert's "KiB"), and errors that name the value.
#include "cairn/api/options.h"

#include <gtest/gtest.h>

#include "cairn/options.h"

namespace cairn::api {
namespace {

TEST(ParseCompression, AcceptsEverySpelling) {
  EXPECT_EQ(*ParseCompression("default"), engine::Compression::kOrbaxDefault);
  EXPECT_EQ(*ParseCompression("zstd"), engine::Compression::kOrbaxDefault);
  EXPECT_EQ(*ParseCompression("none"), engine::Compression::kNone);
  EXPECT_EQ(*ParseCompression("auto"), engine::Compression::kAuto);
  auto bad = ParseCompression("lz4");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("`lz4`"), std::string::npos) << bad.status().ToString();
}

// The public managers accept "zstd" too (only the Python binding did).
TEST(ParseCompression, EveryPublicPathTakesZstd) {
  SaveCheckpointOptions o;
  o.compression = "zstd";
  auto engine_options = EngineSaveOptions(o);
  ASSERT_TRUE(engine_options.ok()) << engine_options.status().ToString();
  EXPECT_EQ(engine_options->compression, engine::Compression::kOrbaxDefault);
}

// Every public field reaches the engine (the emergency path used to leave
// out replica_parallel, chunk_byte_size and target_data_file_size).
TEST(EngineSaveOptions, CopiesEveryField) {
  SaveCheckpointOptions o;
  o.use_ocdbt = false;
  o.use_zarr3 = false;
  o.replica_parallel = false;
  o.compression = "auto";
  o.memory_budget_bytes = 12345;
  o.target_data_file_size = 777;
  o.chunk_byte_size = 4096;
  o.timeout = std::chrono::seconds(3);
  auto e = EngineSaveOptions(o);
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_FALSE(e->use_ocdbt);
  EXPECT_FALSE(e->use_zarr3);
  EXPECT_FALSE(e->replica_parallel);
  EXPECT_EQ(e->compression, engine::Compression::kAuto);
  EXPECT_EQ(e->memory_budget_bytes, 12345u);
  EXPECT_EQ(e->target_data_file_size, 777u);
  EXPECT_EQ(e->chunk_byte_size, 4096u);
  EXPECT_EQ(e->timeout, std::chrono::seconds(3));
  o.compression = "fast";
  auto bad = EngineSaveOptions(o);
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("`fast`"), std::string::npos) << bad.status().ToString();
}

TEST(ParseByteSize, AcceptsEveryUnit) {
  const std::pair<const char*, uint64_t> cases[] = {
      {"1000", 1000},           {"0", 0},
      {"12B", 12},              {"12b", 12},
      {"64k", 64 << 10},        {"64K", 64 << 10},
      {"64KiB", 64 << 10},      {"64kib", 64 << 10},
      {"512M", 512 << 20},      {"512MiB", 512 << 20},
      {"512mib", 512 << 20},    {"1GiB", uint64_t{1} << 30},
      {"1g", uint64_t{1} << 30}, {"1.5G", uint64_t{3} << 29},
      {"2KB", 2000},            {"2kb", 2000},
      {"500MB", 500000000},     {"3GB", 3000000000},
      {"+4MiB", 4 << 20},
  };
  for (const auto& [text, bytes] : cases) {
    auto parsed = ParseByteSize(text);
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status().ToString();
    EXPECT_EQ(*parsed, bytes) << text;
  }
}

TEST(ParseByteSize, RejectsWithTheText) {
  for (const char* text : {"", "MiB", "12 parsecs", "-1MiB", "nan", "inf", "1e30GiB", "12XB"}) {
    auto parsed = ParseByteSize(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_NE(parsed.status().message().find("`" + std::string(text) + "`"), std::string::npos)
        << parsed.status().ToString();
  }
}

}  // namespace
}  // namespace cairn::api
