// Conversions that transpose arrays (ArrayMapping::source_axes, set by a
// rename preset): every writer gets each element at its transposed place,
// through slabs, edge chunks, casts and `verify`, within the budget.
#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cairn/dtype/cast.h"
#include "cairn/engine/convert/convert.h"
#include "cairn/engine/convert/convert_memory.h"
#include "cairn/engine/convert/rename_presets.h"
#include "cairn/engine/testing/random_data.h"
#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/layout/axlearn/axlearn_checkpoint.h"
#include "cairn/layout/safetensors/safetensors_reader.h"
#include "cairn/layout/safetensors/safetensors_writer.h"

namespace cairn::engine {
namespace {

using layout::ArrayInfo;

constexpr Index kIn = 96, kOut = 136;  // chunks of [32, 48]: edge chunks on the second axis

// A flax Llama-like tree in an AXLearn step: one Dense kernel [in, out], a
// bias and an RMS norm weight (not transposed). Returns the bytes by path.
std::map<std::string, std::vector<uint8_t>> WriteSource(const std::shared_ptr<KvStore>& store) {
  const std::vector<ArrayInfo> arrays = {
      ArrayInfo{"model/layers/0/mlp/up_proj/kernel", DType::kFloat32, {kIn, kOut}, {32, 48}, 0,
                {"model", "layers", "0", "mlp", "up_proj", "kernel"}},
      ArrayInfo{"model/layers/0/mlp/up_proj/bias", DType::kFloat32, {kOut}, {kOut}, 0,
                {"model", "layers", "0", "mlp", "up_proj", "bias"}},
      ArrayInfo{"model/norm/weight", DType::kFloat32, {kIn}, {kIn}, 0, {"model", "norm", "weight"}}};
  std::map<std::string, std::vector<uint8_t>> data;
  int seed = 40;
  auto writer = axlearn::CreateWriter(store, "src", arrays, {});
  EXPECT_TRUE(writer.ok()) << writer.status().ToString();
  for (const ArrayInfo& a : arrays) {
    data[a.path] = testing::RandomFloatBytes(NumElements(a.shape), ++seed);
    EXPECT_TRUE((*writer)->WriteBox(a.path, Box::FromShape(a.shape), data[a.path].data()).ok());
  }
  EXPECT_TRUE((*writer)->Commit().ok());
  return data;
}

// `in` ([rows, cols] float32) transposed.
std::vector<uint8_t> Transposed(const std::vector<uint8_t>& in, Index rows, Index cols) {
  std::vector<uint8_t> out(in.size());
  for (Index r = 0; r < rows; ++r) {
    for (Index c = 0; c < cols; ++c) std::memcpy(&out[(c * rows + r) * 4], &in[(r * cols + c) * 4], 4);
  }
  return out;
}

ConvertOptions LlamaOptions(uint64_t budget) {
  ConvertOptions options;
  auto preset = FindRenamePreset("llama");
  EXPECT_TRUE(preset.ok());
  options.plan.preset = (*preset)->rules;
  options.plan.preset_adjust = (*preset)->adjust;
  options.memory_budget = budget;
  options.threads = 3;
  options.verify = true;
  return options;
}

std::vector<uint8_t> ReadAll(layout::CheckpointReader& r, const std::string& path) {
  const ArrayInfo* a = layout::FindArray(r.arrays(), path);
  EXPECT_NE(a, nullptr) << path;
  if (a == nullptr) return {};
  std::vector<uint8_t> out(NumElements(a->shape) * DTypeSize(a->dtype));
  EXPECT_TRUE(r.ReadBox(path, Box::FromShape(a->shape), out.data()).ok());
  return out;
}

TEST(ConvertTranspose, SafetensorsGetsPyTorchLinearWeightsAtAnyBudget) {
  auto store = std::make_shared<MemoryKvStore>();
  auto data = WriteSource(store);
  // 16 KiB cuts the kernel (51 KiB) into slabs of a few rows; 4 MiB holds it.
  for (const uint64_t budget : {uint64_t{64} << 10, uint64_t{4} << 20}) {
    auto source = axlearn::OpenReader(store, "src");
    ASSERT_TRUE(source.ok()) << source.status().ToString();
    const std::string dst = "st" + std::to_string(budget) + "/";
    ConvertOptions options = LlamaOptions(budget);
    auto stats = Convert(
        **source,
        [&](const std::vector<ArrayInfo>& arrays) -> Result<std::unique_ptr<layout::CheckpointWriter>> {
          CAIRN_ASSIGN_OR_RETURN(auto w, safetensors::CreateWriter(store, dst, arrays, {}));
          return std::unique_ptr<layout::CheckpointWriter>(std::move(w));
        },
        [&] { return safetensors::OpenReader(store, dst); }, options);
    ASSERT_TRUE(stats.ok()) << budget << ": " << stats.status().ToString();
    EXPECT_LE(stats->peak_slab_bytes, budget);
    auto dest = safetensors::OpenReader(store, dst);
    ASSERT_TRUE(dest.ok());
    const ArrayInfo* w = layout::FindArray((*dest)->arrays(), "model.layers.0.mlp.up_proj.weight");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->shape, (Shape{kOut, kIn}));
    EXPECT_EQ(ReadAll(**dest, "model.layers.0.mlp.up_proj.weight"),
              Transposed(data["model/layers/0/mlp/up_proj/kernel"], kIn, kOut));
    EXPECT_EQ(ReadAll(**dest, "model.layers.0.mlp.up_proj.bias"), data["model/layers/0/mlp/up_proj/bias"]);
    EXPECT_EQ(ReadAll(**dest, "model.norm.weight"), data["model/norm/weight"]);
  }
}

// The stored bytes of the source kernel's chunks.
uint64_t KernelChunkBytes(KvStore& store) {
  auto keys = store.List("src/gda/model/layers/0/mlp/up_proj/kernel/");
  EXPECT_TRUE(keys.ok());
  uint64_t total = 0;
  for (const KeyInfo& k : *keys) {
    if (k.key.find(".zarray") == std::string::npos) total += k.size;
  }
  return total;
}

// Safetensors takes the transposed kernel in bands of its rows, which are
// columns of the source: bands of whole source chunks' columns decode each
// chunk once. Bands fitted to the slab alone (136 rows in 128 and 8) cut
// the last column of chunks, decoding it twice.
TEST(ConvertTranspose, SafetensorsBandsDecodeEachSourceChunkOnce) {
  auto store = std::make_shared<MemoryKvStore>();
  auto data = WriteSource(store);
  const uint64_t kernel = KernelChunkBytes(*store);
  ASSERT_GT(kernel, 0u);
  for (const uint64_t budget : {uint64_t{256} << 10, uint64_t{4} << 20}) {
    auto source = axlearn::OpenReader(store, "src");
    ASSERT_TRUE(source.ok());
    ConvertOptions options = LlamaOptions(budget);
    options.verify = false;
    options.plan.include = {"*kernel"};
    const std::string dst = "band" + std::to_string(budget) + "/";
    auto stats = Convert(
        **source,
        [&](const std::vector<ArrayInfo>& arrays) -> Result<std::unique_ptr<layout::CheckpointWriter>> {
          CAIRN_ASSIGN_OR_RETURN(auto w, safetensors::CreateWriter(store, dst, arrays, {}));
          return std::unique_ptr<layout::CheckpointWriter>(std::move(w));
        },
        nullptr, options);
    ASSERT_TRUE(stats.ok()) << stats.status().ToString();
    EXPECT_EQ(stats->bytes_read, kernel) << "budget " << budget << ": read "
                                         << double(stats->bytes_read) / double(kernel) << "x the stored kernel";
    EXPECT_LE(stats->peak_slab_bytes, budget);
    auto dest = safetensors::OpenReader(store, dst);
    ASSERT_TRUE(dest.ok());
    EXPECT_EQ(ReadAll(**dest, "model.layers.0.mlp.up_proj.weight"),
              Transposed(data["model/layers/0/mlp/up_proj/kernel"], kIn, kOut));
  }
}

TEST(TransposedBand, WholeUnitsOfTheSourcePiecesColumns) {
  // A [2048, 32000] kernel in row pieces [256, 32000]: one band is the array.
  ArrayInfo src{"k", DType::kFloat32, {2048, 32000}, {2048, 32000}, 0, {"k"}, {256, 32000}};
  ArrayMapping m{src, src};
  ASSERT_TRUE(TransposeMapping(m, {1, 0}).ok());
  const uint64_t whole = uint64_t{2048} * 32000 * 8;  // source and rearranged bytes
  EXPECT_EQ(TransposedBand(m, 1 << 20, uint64_t{1} << 30, 0), (Shape{32000, 2048}));
  EXPECT_TRUE(TransposedBand(m, 1 << 20, whole - 1, 0).empty());  // over the budget: slabs
  // Column pieces [2048, 4000]: bands of 4000 rows, as many as fit the slab.
  m.source.read_shape = {2048, 4000};
  EXPECT_EQ(TransposedBand(m, 3 * uint64_t{4000} * 2048 * 8, uint64_t{1} << 30, 0), (Shape{12000, 2048}));
  EXPECT_EQ(TransposedBand(m, 1 << 20, uint64_t{1} << 30, 0), (Shape{4000, 2048}));  // one unit, alone
  // Not transposed, or a source without pieces: none.
  ArrayMapping plain{src, src};
  EXPECT_TRUE(TransposedBand(plain, 1 << 20, uint64_t{1} << 30, 0).empty());
}

TEST(ConvertTranspose, ChunkedWriterAndCastGetTheTransposeToo) {
  auto store = std::make_shared<MemoryKvStore>();
  auto data = WriteSource(store);
  auto source = axlearn::OpenReader(store, "src");
  ASSERT_TRUE(source.ok());
  ConvertOptions options = LlamaOptions(uint64_t{256} << 10);
  options.plan.dest_separator = '/';
  options.plan.casts = {{"*kernel", DType::kBFloat16}};
  auto make = [&](const std::vector<ArrayInfo>& arrays) -> Result<std::unique_ptr<layout::CheckpointWriter>> {
    CAIRN_ASSIGN_OR_RETURN(auto w, axlearn::CreateWriter(store, "out", arrays, {}));
    return std::unique_ptr<layout::CheckpointWriter>(std::move(w));
  };
  auto stats = Convert(**source, make, [&] { return axlearn::OpenReader(store, "out"); }, options);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  // The bias and the norm weight pass as stored (one chunk each); a
  // transposed chunk never does.
  EXPECT_EQ(stats->chunks_copied_stored, 2u);
  auto dest = axlearn::OpenReader(store, "out");
  ASSERT_TRUE(dest.ok());
  const ArrayInfo* w = layout::FindArray((*dest)->arrays(), "model/layers/0/mlp/up_proj/weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape, (Shape{kOut, kIn}));
  EXPECT_EQ(w->dtype, DType::kBFloat16);
  std::vector<uint8_t> want(kIn * kOut * 2);
  const auto t = Transposed(data["model/layers/0/mlp/up_proj/kernel"], kIn, kOut);
  ASSERT_TRUE(CastElements(DType::kFloat32, t.data(), DType::kBFloat16, want.data(), kIn * kOut).ok());
  EXPECT_EQ(ReadAll(**dest, "model/layers/0/mlp/up_proj/weight"), want);
  // The norm weight kept its place and its layout.
  EXPECT_EQ(ReadAll(**dest, "model/norm/weight"), data["model/norm/weight"]);
}

TEST(ConvertTranspose, VerifyComparesThroughTheTranspose) {
  // A destination written without the transpose (as the rename alone would)
  // holds the right bytes in the wrong places: verify must say so.
  auto store = std::make_shared<MemoryKvStore>();
  auto data = WriteSource(store);
  auto source = axlearn::OpenReader(store, "src");
  ASSERT_TRUE(source.ok());
  ConvertOptions options = LlamaOptions(uint64_t{4} << 20);
  auto plan = PlanConversion((*source)->arrays(), options.plan);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::vector<ArrayInfo> wrong;
  for (const ArrayMapping& m : *plan) wrong.push_back(m.dest);
  auto w = safetensors::CreateWriter(store, "wrong/", wrong, {});
  ASSERT_TRUE(w.ok());
  for (const ArrayMapping& m : *plan) {  // the source bytes, untransposed, under the new shape
    ASSERT_TRUE((*w)->WriteBox(m.dest.path, Box::FromShape(m.dest.shape), data[m.source.path].data()).ok());
  }
  ASSERT_TRUE((*w)->Commit().ok());
  auto dest = safetensors::OpenReader(store, "wrong/");
  ASSERT_TRUE(dest.ok());
  for (ArrayMapping& m : *plan) m.dest.write_shape = m.dest.shape;
  Status s = VerifyConversion(**source, **dest, *plan, uint64_t{4} << 20, nullptr);
  ASSERT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find("model.layers.0.mlp.up_proj.weight"), std::string_view::npos) << s.ToString();
}

TEST(TransposeMapping, RefusesAxesThatAreNotAPermutation) {
  ArrayInfo a{"k", DType::kFloat32, {2, 3}, {2, 3}, 0, {"k"}};
  ArrayMapping m{a, a};
  EXPECT_EQ(TransposeMapping(m, {0, 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TransposeMapping(m, {1}).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(TransposeMapping(m, {1, 0}).ok());
  EXPECT_EQ(m.dest.shape, (Shape{3, 2}));
  EXPECT_EQ(SourceBox(m, Box{{1, 0}, {2, 1}}).origin, (std::vector<Index>{0, 1}));
  ASSERT_TRUE(TransposeMapping(m, {0, 1}).ok());
  EXPECT_TRUE(m.source_axes.empty());  // the identity is no transpose
}

}  // namespace
}  // namespace cairn::engine
