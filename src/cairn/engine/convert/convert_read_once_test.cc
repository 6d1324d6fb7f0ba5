// A conversion reads each stored source chunk once, whatever the budget,
// as long as the budget holds one source chunk and one destination chunk;
// a smaller budget is refused, naming the least one (convert_memory.h).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "cairn/engine/convert/convert.h"
#include "cairn/engine/convert/convert_memory.h"
#include "cairn/engine/testing/random_data.h"
#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/layout/axlearn/axlearn_checkpoint.h"
#include "cairn/layout/safetensors/safetensors_reader.h"
#include "cairn/layout/safetensors/safetensors_writer.h"

namespace cairn::engine {
namespace {

using layout::ArrayInfo;

constexpr uint64_t kKiB = 1024;

// One float32 array of 2 MiB in 8 chunks of 256 KiB (zstd level 1), as
// AXLearn (TensorStore's zarr driver) stores it; returns its values.
std::vector<uint8_t> WriteSource(const std::shared_ptr<KvStore>& store) {
  const std::vector<ArrayInfo> arrays = {
      ArrayInfo{"w", DType::kFloat32, {512, 1024}, {64, 1024}, 0, {"w"}}};
  auto data = testing::RandomFloatBytes(512 * 1024, 28);
  auto writer = axlearn::CreateWriter(store, "src", arrays, {});
  EXPECT_TRUE(writer.ok()) << writer.status().ToString();
  EXPECT_TRUE((*writer)->WriteBox("w", Box::FromShape({512, 1024}), data.data()).ok());
  EXPECT_TRUE((*writer)->Commit().ok());
  return data;
}

// The bytes of the source's stored chunks (not its metadata).
uint64_t StoredChunkBytes(KvStore& store) {
  auto keys = store.List("src/gda/w/");
  EXPECT_TRUE(keys.ok());
  uint64_t total = 0, chunks = 0;
  for (const KeyInfo& k : *keys) {
    if (k.key.find(".zarray") != std::string::npos) continue;
    total += k.size;
    ++chunks;
  }
  EXPECT_EQ(chunks, 8u);
  return total;
}

Result<ConvertStats> ConvertTo(const std::shared_ptr<KvStore>& store, const std::string& dest,
                               uint64_t budget) {
  CAIRN_ASSIGN_OR_RETURN(auto source, axlearn::OpenReader(store, "src"));
  ConvertOptions options;
  options.plan.dest_separator = '/';
  options.memory_budget = budget;
  options.threads = 4;
  auto make = [&](const std::vector<ArrayInfo>& planned)
      -> Result<std::unique_ptr<layout::CheckpointWriter>> {
    CAIRN_ASSIGN_OR_RETURN(auto w, axlearn::CreateWriter(store, dest, planned, {}));
    return std::unique_ptr<layout::CheckpointWriter>(std::move(w));
  };
  return Convert(*source, make, nullptr, options);
}

TEST(ConvertReadOnce, EachStoredChunkIsReadOnceAtAnyBudgetThatHoldsOneOfEach) {
  auto store = std::make_shared<MemoryKvStore>();
  const std::vector<uint8_t> data = WriteSource(store);
  const uint64_t stored = StoredChunkBytes(*store);
  ASSERT_LT(stored, data.size());  // compressed: bytes read are stored bytes
  const ArrayInfo src{"w", DType::kFloat32, {512, 1024}, {64, 1024}, 0, {"w"}, {64, 1024}};
  const uint64_t least = MinimumBudget(ArrayMapping{src, src});
  ASSERT_EQ(least, 2 * 256 * kKiB);  // one source chunk and one destination chunk
  // The least budget (the old plan cut each chunk in 4 and read it 4
  // times), twice that (2 times), and one that holds everything.
  for (const uint64_t budget : {least, 2 * least, uint64_t{64} << 20}) {
    const std::string dest = "dst" + std::to_string(budget);
    auto stats = ConvertTo(store, dest, budget);
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    EXPECT_EQ(stats->bytes_read, stored) << "budget " << budget << ": read "
                                         << double(stats->bytes_read) / double(stored)
                                         << "x the stored bytes";
    EXPECT_EQ(stats->bytes_written, data.size());
    EXPECT_GT(stats->peak_slab_bytes, 0u);
    EXPECT_LE(stats->peak_slab_bytes, budget);
    auto out = axlearn::OpenReader(store, dest);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    std::vector<uint8_t> got(data.size());
    ASSERT_TRUE((*out)->ReadBox("w", Box::FromShape({512, 1024}), got.data()).ok());
    EXPECT_TRUE(got == data) << "budget " << budget;
  }
}

// A writer that takes bytes in storage order (safetensors) gets a source
// stored in bands of whole rows one band at a time: each is decoded once.
// Row slabs fitted to the budget cut across the bands (2x at 512 KiB).
TEST(ConvertReadOnce, AnOrderedWriterTakesBandsOfRowsWholeAndReadsThemOnce) {
  auto store = std::make_shared<MemoryKvStore>();
  const std::vector<uint8_t> data = WriteSource(store);
  const uint64_t stored = StoredChunkBytes(*store);
  for (const uint64_t budget : {512 * kKiB, 2 * 512 * kKiB}) {
    auto source = axlearn::OpenReader(store, "src");
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    const std::string dest = "st" + std::to_string(budget) + "/";
    ConvertOptions options;
    options.memory_budget = budget;
    options.threads = 4;
    auto make = [&](const std::vector<ArrayInfo>& planned)
        -> Result<std::unique_ptr<layout::CheckpointWriter>> {
      CAIRN_ASSIGN_OR_RETURN(auto w, safetensors::CreateWriter(store, dest, planned, {}));
      return std::unique_ptr<layout::CheckpointWriter>(std::move(w));
    };
    auto stats = Convert(**source, make, nullptr, options);
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    EXPECT_EQ(stats->bytes_read, stored) << "budget " << budget << ": read "
                                         << double(stats->bytes_read) / double(stored) << "x";
    EXPECT_LE(stats->peak_slab_bytes, budget);
    auto out = safetensors::OpenReader(store, dest);
    ASSERT_TRUE(out.ok()) << out.status().ToString();
    std::vector<uint8_t> got(data.size());
    ASSERT_TRUE((*out)->ReadBox("w", Box::FromShape({512, 1024}), got.data()).ok());
    EXPECT_TRUE(got == data) << "budget " << budget;
  }
}

// Forwards to a reader and, when dropped, records the stored bytes it read.
class RecordingReader final : public layout::CheckpointReader {
 public:
  RecordingReader(std::unique_ptr<layout::CheckpointReader> inner, uint64_t& read)
      : inner_(std::move(inner)), read_(read) {}
  ~RecordingReader() override { read_ = inner_->StoredBytesRead().value_or(0); }
  std::string_view format() const override { return inner_->format(); }
  const std::vector<ArrayInfo>& arrays() const override { return inner_->arrays(); }
  Status ReadBox(std::string_view path, const Box& box, void* dest) override {
    return inner_->ReadBox(path, box, dest);
  }
  Result<std::optional<Buffer>> ReadWholeChunk(std::string_view path, const Box& box) override {
    return inner_->ReadWholeChunk(path, box);
  }
  std::optional<uint64_t> StoredBytesRead() const override { return inner_->StoredBytesRead(); }

 private:
  std::unique_ptr<layout::CheckpointReader> inner_;
  uint64_t& read_;
};

// `--verify` reads each stored chunk of the source and of the destination
// once at the least budget too: it compares whole destination chunks (or,
// for a safetensors file, whole source bands), never slabs cut across them.
TEST(ConvertReadOnce, VerifyReadsEachStoredChunkOnceAtTheLeastBudget) {
  auto store = std::make_shared<MemoryKvStore>();
  WriteSource(store);
  const uint64_t stored = StoredChunkBytes(*store);
  const uint64_t least = 2 * 256 * kKiB;
  for (const bool to_safetensors : {false, true}) {
    auto source = axlearn::OpenReader(store, "src");
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    const uint64_t opened = (*source)->StoredBytesRead().value_or(0);
    const std::string dest = to_safetensors ? "vst/" : "vax";
    ConvertOptions options;
    options.plan.dest_separator = '/';
    options.memory_budget = least;
    options.threads = 4;
    options.verify = true;
    auto make = [&](const std::vector<ArrayInfo>& planned) -> Result<std::unique_ptr<layout::CheckpointWriter>> {
      if (to_safetensors) {
        CAIRN_ASSIGN_OR_RETURN(auto w, safetensors::CreateWriter(store, dest, planned, {}));
        return std::unique_ptr<layout::CheckpointWriter>(std::move(w));
      }
      CAIRN_ASSIGN_OR_RETURN(auto w, axlearn::CreateWriter(store, dest, planned, {}));
      return std::unique_ptr<layout::CheckpointWriter>(std::move(w));
    };
    uint64_t dest_read = 0;
    auto open_dest = [&]() -> Result<std::unique_ptr<layout::CheckpointReader>> {
      std::unique_ptr<layout::CheckpointReader> r;
      if (to_safetensors) {
        CAIRN_ASSIGN_OR_RETURN(r, safetensors::OpenReader(store, dest));
      } else {
        CAIRN_ASSIGN_OR_RETURN(auto a, axlearn::OpenReader(store, dest));
        r = std::move(a);
      }
      return std::unique_ptr<layout::CheckpointReader>(std::make_unique<RecordingReader>(std::move(r), dest_read));
    };
    auto stats = Convert(**source, make, open_dest, options);
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    const uint64_t verify_read = (*source)->StoredBytesRead().value_or(0) - opened - stats->bytes_read;
    EXPECT_EQ(verify_read, stored) << (to_safetensors ? "safetensors" : "AXLearn") << ": verify read "
                                   << double(verify_read) / double(stored) << "x the source's stored bytes";
    if (!to_safetensors) {  // the destination's chunks are the source's, passed as stored
      auto keys = store->List("vax/gda/w/");
      ASSERT_TRUE(keys.ok());
      uint64_t dest_chunks = 0, dest_meta = 0;
      for (const KeyInfo& k : *keys) (k.key.find(".zarray") == std::string::npos ? dest_chunks : dest_meta) += k.size;
      EXPECT_LE(dest_read, dest_chunks + dest_meta + 4096) << "verify read the destination "
                                                            << double(dest_read) / double(dest_chunks) << "x";
      EXPECT_GE(dest_read, dest_chunks);
    }
  }
}

// Passes boxes to a writer, failing the second one; counts the boxes it
// is handed after that.
class FailSecondBox final : public layout::CheckpointWriter {
 public:
  FailSecondBox(std::unique_ptr<layout::CheckpointWriter> inner, std::atomic<int>& after_failure)
      : inner_(std::move(inner)), after_failure_(after_failure) {}
  std::string_view format() const override { return inner_->format(); }
  const std::vector<std::string>* required_order() const override {
    return inner_->required_order();
  }
  Status WriteBox(std::string_view path, const Box& box, const void* src) override {
    const int call = calls_.fetch_add(1);
    if (call == 1) {
      // Let the next box's thread reach its turn and wait there.
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      return Status(StatusCode::kUnavailable, "injected upload failure");
    }
    if (call > 1) after_failure_.fetch_add(1);
    return inner_->WriteBox(path, box, src);
  }
  Status Commit() override { return inner_->Commit(); }

 private:
  std::unique_ptr<layout::CheckpointWriter> inner_;
  std::atomic<int>& after_failure_;
  std::atomic<int> calls_{0};
};

// When a write to an ordered writer fails, no later box is written after
// the hole, and the failed write's error is the one reported (not the
// writer's complaint that the next box is out of order). Raced: repeated.
TEST(ConvertReadOnce, AFailedWriteToAnOrderedWriterIsTheErrorReported) {
  auto store = std::make_shared<MemoryKvStore>();
  WriteSource(store);
  for (int round = 0; round < 10; ++round) {
    auto source = axlearn::OpenReader(store, "src");
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    ConvertOptions options;
    options.memory_budget = 4 << 20;
    options.threads = 4;
    std::atomic<int> after_failure{0};
    auto make = [&](const std::vector<ArrayInfo>& planned)
        -> Result<std::unique_ptr<layout::CheckpointWriter>> {
      CAIRN_ASSIGN_OR_RETURN(auto w, safetensors::CreateWriter(store, "fail/", planned, {}));
      return std::unique_ptr<layout::CheckpointWriter>(
          std::make_unique<FailSecondBox>(std::move(w), after_failure));
    };
    auto stats = Convert(**source, make, nullptr, options);
    ASSERT_FALSE(stats.ok());
    EXPECT_NE(stats.status().message().find("injected upload failure"), std::string_view::npos)
        << "round " << round << ": " << stats.status().ToString();
    EXPECT_EQ(after_failure.load(), 0) << "round " << round;
  }
}

TEST(ConvertReadOnce, ABudgetBelowOneSourceAndOneDestinationChunkIsRefused) {
  auto store = std::make_shared<MemoryKvStore>();
  WriteSource(store);
  auto stats = ConvertTo(store, "dst", 512 * kKiB - 1);
  ASSERT_FALSE(stats.ok());
  EXPECT_EQ(stats.status().code(), StatusCode::kInvalidArgument);
  const std::string message(stats.status().message());
  for (const std::string part :
       {"array `w`", "[64, 1024]", "256KiB decoded", "524287 bytes", "--memory-budget 512KiB",
        "memory_budget=524288"}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
  }
  // Nothing was created: the refusal comes before the destination.
  auto keys = store->List("dst");
  ASSERT_TRUE(keys.ok());
  EXPECT_TRUE(keys->empty());
}

TEST(ConvertReadOnce, DestinationChunksAreFittedInWholeSourceChunks) {
  // 8 x 4 source chunks fitted down: whole multiples of the unit.
  EXPECT_EQ(FitChunkShapeInUnits({512, 1024}, {64, 256}, 4, 512 * kKiB), (Shape{128, 1024}));
  // One unit over the limit stays one unit, never cut.
  EXPECT_EQ(FitChunkShapeInUnits({512, 1024}, {64, 1024}, 12, 192 * kKiB), (Shape{64, 1024}));
  // A unit that does not divide the chunk is clipped to it.
  EXPECT_EQ(FitChunkShapeInUnits({100, 10}, {64, 10}, 4, 1 << 20), (Shape{100, 10}));
  EXPECT_EQ(FitChunkShapeInUnits({100, 10}, {64, 10}, 4, 2600), (Shape{64, 10}));
  // No unit: as FitChunkShape.
  EXPECT_EQ(FitChunkShapeInUnits({512, 1024}, {}, 4, 512 * kKiB), FitChunkShape({512, 1024}, 4, 512 * kKiB));
  EXPECT_EQ(FormatBudget(512 * kKiB + 1), "513KiB");
  EXPECT_EQ(FormatBudget((uint64_t{512} << 20) + 1), "513MiB");
  EXPECT_EQ(RoundUpBudget((uint64_t{512} << 20) + 1), uint64_t{513} << 20);
  EXPECT_EQ(FormatBudget(100), "100B");
}

}  // namespace
}  // namespace cairn::engine
