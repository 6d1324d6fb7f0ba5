#include "cairn/engine/convert/convert.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <random>

#include "cairn/dtype/cast.h"
#include "cairn/engine/testing/random_data.h"
#include "cairn/engine/convert/convert_checkpoint.h"
#include "cairn/kvstore/url.h"
#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/kvstore/testing/fault_kvstore.h"
#include "cairn/layout/axlearn/axlearn_checkpoint.h"
#include "cairn/layout/safetensors/safetensors_reader.h"
#include "cairn/layout/safetensors/safetensors_writer.h"

namespace cairn::engine {
namespace {

using layout::ArrayInfo;

ArrayInfo Info(std::string path, DType dtype, Shape shape, Shape write_shape) {
  return ArrayInfo{path, dtype, shape, write_shape, 0, layout::SplitTreePath(path, '/')};
}

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(rng());
  return v;
}

using testing::RandomFloatBytes;

// An AXLearn step in memory with a few arrays; returns their bytes by path.
std::map<std::string, std::vector<uint8_t>> WriteAxlearnSource(std::shared_ptr<KvStore> store) {
  std::vector<ArrayInfo> arrays = {
      Info("model/w", DType::kFloat32, {64, 48}, {16, 48}),
      Info("model/b", DType::kFloat32, {48}, {48}),
      Info("learner/count", DType::kInt32, {}, {}),
      Info("learner/mu/w", DType::kFloat32, {64, 48}, {32, 16}),
  };
  std::map<std::string, std::vector<uint8_t>> data;
  data["model/w"] = RandomFloatBytes(64 * 48, 1);
  data["model/b"] = RandomFloatBytes(48, 2);
  data["learner/count"] = RandomBytes(4, 3);
  data["learner/mu/w"] = RandomFloatBytes(64 * 48, 4);
  axlearn::WriterOptions options;
  options.step = 5;
  auto writer = axlearn::CreateWriter(store, "src/step_00000005", arrays, options);
  EXPECT_TRUE(writer.ok()) << writer.status().ToString();
  for (const ArrayInfo& a : arrays) {
    EXPECT_TRUE((*writer)->WriteBox(a.path, Box::FromShape(a.shape), data[a.path].data()).ok());
  }
  EXPECT_TRUE((*writer)->Commit().ok());
  return data;
}

WriterFactory SafetensorsTo(std::shared_ptr<KvStore> store, std::string prefix) {
  return [store, prefix](const std::vector<ArrayInfo>& arrays) -> Result<std::unique_ptr<layout::CheckpointWriter>> {
    CAIRN_ASSIGN_OR_RETURN(auto w, safetensors::CreateWriter(store, prefix, arrays, {}));
    return std::unique_ptr<layout::CheckpointWriter>(std::move(w));
  };
}

TEST(Convert, AxlearnToSafetensorsWithCastRenameAndFilter) {
  auto store = std::make_shared<MemoryKvStore>();
  auto data = WriteAxlearnSource(store);
  auto source = axlearn::OpenReader(store, "src/step_00000005");
  ASSERT_TRUE(source.ok()) << source.status().ToString();
  ConvertOptions options;
  options.plan.include = {"model/*"};
  options.plan.dest_separator = '.';
  options.plan.renames = {{"model.", "transformer."}};
  options.plan.casts = {{"model/w", DType::kBFloat16}};
  options.memory_budget = 16 << 10;  // forces slabs of a few rows
  options.threads = 3;
  options.verify = true;
  std::vector<ConvertProgress> progress;
  options.progress = [&](const ConvertProgress& p) { progress.push_back(p); };
  auto stats = Convert(**source, SafetensorsTo(store, "dst/"),
                       [&] { return safetensors::OpenReader(store, "dst/"); }, options);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_EQ(stats->arrays, 2u);
  EXPECT_LE(stats->peak_slab_bytes, options.memory_budget);
  EXPECT_EQ(stats->bytes_written, 64u * 48 * 2 + 48 * 4);
  ASSERT_FALSE(progress.empty());
  EXPECT_EQ(progress.back().bytes_done, progress.back().bytes_total);
  EXPECT_EQ(progress.back().arrays_done, 2u);

  auto dest = safetensors::OpenReader(store, "dst/");
  ASSERT_TRUE(dest.ok());
  ASSERT_EQ((*dest)->arrays().size(), 2u);
  EXPECT_EQ((*dest)->arrays()[0].path, "transformer.b");
  EXPECT_EQ((*dest)->arrays()[1].path, "transformer.w");
  EXPECT_EQ((*dest)->arrays()[1].dtype, DType::kBFloat16);
  std::vector<uint16_t> w(64 * 48), want(64 * 48);
  ASSERT_TRUE((*dest)->ReadBox("transformer.w", Box::FromShape({64, 48}), w.data()).ok());
  ASSERT_TRUE(CastElements(DType::kFloat32, data["model/w"].data(), DType::kBFloat16, want.data(),
                           want.size()).ok());
  EXPECT_EQ(w, want);
}

TEST(Convert, SafetensorsToAxlearnKeepsBytesAndCommitsLast) {
  auto store = std::make_shared<MemoryKvStore>();
  auto data = WriteAxlearnSource(store);
  auto axl = axlearn::OpenReader(store, "src/step_00000005");
  ASSERT_TRUE(axl.ok());
  ConvertOptions to_st;
  ASSERT_TRUE(Convert(**axl, SafetensorsTo(store, "st/"), nullptr, to_st).ok());
  auto st = safetensors::OpenReader(store, "st/");
  ASSERT_TRUE(st.ok());
  ConvertOptions back;
  back.plan.dest_separator = '/';
  back.memory_budget = 8 << 10;
  back.verify = true;
  auto make = [&](const std::vector<ArrayInfo>& arrays) -> Result<std::unique_ptr<layout::CheckpointWriter>> {
    axlearn::WriterOptions o;
    o.step = 5;
    return axlearn::CreateWriter(store, "back/step_00000005", arrays, o);
  };
  auto stats = Convert(**st, make, [&] { return axlearn::OpenReader(store, "back/step_00000005"); },
                       back);
  ASSERT_TRUE(stats.ok()) << stats.status().ToString();
  EXPECT_LE(stats->peak_slab_bytes, back.memory_budget);
  auto again = axlearn::OpenReader(store, "back/step_00000005");
  ASSERT_TRUE(again.ok());
  for (const auto& [path, bytes] : data) {
    std::vector<uint8_t> got(bytes.size());
    const ArrayInfo* a = layout::FindArray((*again)->arrays(), path);
    ASSERT_NE(a, nullptr) << path;
    ASSERT_TRUE((*again)->ReadBox(path, Box::FromShape(a->shape), got.data()).ok());
    EXPECT_EQ(got, bytes) << path;
  }
}

TEST(Convert, AFailedWriteLeavesNothingCommitted) {
  auto base = std::make_shared<MemoryKvStore>();
  WriteAxlearnSource(base);
  auto source = axlearn::OpenReader(base, "src/step_00000005");
  ASSERT_TRUE(source.ok());
  for (uint64_t n : {0, 3, 6}) {
    auto dest_base = std::make_shared<MemoryKvStore>();
    auto faulty = std::make_shared<FaultKvStore>(dest_base);
    faulty->FailNthWrite(n, Status(StatusCode::kResourceExhausted, "disk full (injected)"));
    auto make = [&](const std::vector<ArrayInfo>& arrays) -> Result<std::unique_ptr<layout::CheckpointWriter>> {
      return axlearn::CreateWriter(faulty, "out", arrays, {});
    };
    ConvertOptions options;
    options.plan.dest_separator = '/';
    auto stats = Convert(**source, make, nullptr, options);
    ASSERT_FALSE(stats.ok()) << "write " << n;
    EXPECT_NE(stats.status().message().find("disk full (injected)"), std::string_view::npos);
    EXPECT_FALSE(dest_base->Get("out/index")->has_value()) << "write " << n;
    EXPECT_EQ(axlearn::OpenReader(dest_base, "out").status().code(), StatusCode::kNotFound);
  }
}

// Forwards to a reader, counting the calls of each way of reading.
class CountingReader : public layout::CheckpointReader {
 public:
  explicit CountingReader(layout::CheckpointReader& base) : base_(base) {}
  std::string_view format() const override { return base_.format(); }
  const std::vector<ArrayInfo>& arrays() const override { return base_.arrays(); }
  Status ReadBox(std::string_view path, const Box& box, void* dest) override {
    ++boxes;
    return base_.ReadBox(path, box, dest);
  }
  Result<std::optional<Buffer>> ReadWholeChunk(std::string_view path, const Box& box) override {
    auto got = base_.ReadWholeChunk(path, box);
    if (got.ok() && got->has_value()) ++whole_chunks;
    return got;
  }
  std::atomic<int> boxes{0}, whole_chunks{0};

 private:
  layout::CheckpointReader& base_;
};

TEST(Convert, SameChunkGridsPassWholeChunksAlong) {
  auto store = std::make_shared<MemoryKvStore>();
  auto data = WriteAxlearnSource(store);
  auto opened = axlearn::OpenReader(store, "src/step_00000005");
  ASSERT_TRUE(opened.ok());
  auto run = [&](const std::string& out) {
    CountingReader source(**opened);
    ConvertOptions options;
    options.plan.dest_separator = '/';
    options.memory_budget = 1 << 20;
    auto make = [&](const std::vector<ArrayInfo>& arrays) -> Result<std::unique_ptr<layout::CheckpointWriter>> {
      axlearn::WriterOptions o;
      o.step = 5;
      return axlearn::CreateWriter(store, out + "/step_00000005", arrays, o);
    };
    auto stats = Convert(source, make, nullptr, options);
    EXPECT_TRUE(stats.ok()) << stats.status().ToString();
    if (stats.ok()) {
      EXPECT_LE(stats->peak_slab_bytes, options.memory_budget);
    }
    return std::make_pair(source.whole_chunks.load(), source.boxes.load());
  };
  // 4 + 1 + 1 + 6 chunks, each handed over whole; none read into a slab.
  EXPECT_EQ(run("a"), std::make_pair(12, 0));
  auto a = axlearn::OpenReader(store, "a/step_00000005");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  for (const auto& [path, bytes] : data) {
    std::vector<uint8_t> got(bytes.size());
    const ArrayInfo* info = layout::FindArray((*a)->arrays(), path);
    ASSERT_NE(info, nullptr) << path;
    ASSERT_TRUE((*a)->ReadBox(path, Box::FromShape(info->shape), got.data()).ok());
    EXPECT_EQ(got, bytes) << path;
  }
  // Encoded straight from the handed-over chunk, each chunk is stored with
  // the very bytes the zarr layer's own write stored in the source.
  for (const std::string key : {"gda/model/w/2.0", "gda/learner/mu/w/1.2", "gda/learner/count/0"}) {
    EXPECT_EQ(store->Get("a/step_00000005/" + key)->value().ToString(),
              store->Get("src/step_00000005/" + key)->value().ToString())
        << key;
  }
  // A missing source chunk is not handed over: it goes through a slab
  // (ReadBox fills it with the fill value), and the rest still whole.
  ASSERT_TRUE(store->Delete("src/step_00000005/gda/model/w/1.0").ok());
  EXPECT_EQ(run("b"), std::make_pair(11, 1));
  auto b = axlearn::OpenReader(store, "b/step_00000005");
  ASSERT_TRUE(b.ok());
  std::vector<float> w(64 * 48, 1.0f);
  ASSERT_TRUE((*b)->ReadBox("model/w", Box::FromShape({64, 48}), w.data()).ok());
  std::vector<float> want(64 * 48);
  std::memcpy(want.data(), data["model/w"].data(), want.size() * 4);
  std::fill(want.begin() + 16 * 48, want.begin() + 32 * 48, 0.0f);
  EXPECT_EQ(std::memcmp(w.data(), want.data(), w.size() * 4), 0);
}

TEST(Convert, VerifyCatchesADifferentDestination) {
  auto store = std::make_shared<MemoryKvStore>();
  WriteAxlearnSource(store);
  auto source = axlearn::OpenReader(store, "src/step_00000005");
  ASSERT_TRUE(source.ok());
  ConvertOptions options;
  ASSERT_TRUE(Convert(**source, SafetensorsTo(store, "st/"), nullptr, options).ok());
  auto plan = PlanConversion((*source)->arrays(), options.plan);
  ASSERT_TRUE(plan.ok());
  auto dest = safetensors::OpenReader(store, "st/");
  ASSERT_TRUE(dest.ok());
  ASSERT_TRUE(VerifyConversion(**source, **dest, *plan, 1 << 20).ok());  // control
  // Flip one byte of the data in the destination file.
  auto file = store->Get("st/model.safetensors");
  ASSERT_TRUE(file.ok() && file->has_value());
  std::vector<uint8_t> bytes((*file)->data(), (*file)->data() + (*file)->size());
  bytes[bytes.size() - 5] ^= 1;
  ASSERT_TRUE(store->Put("st/model.safetensors", bytes).ok());
  auto flipped = safetensors::OpenReader(store, "st/");
  ASSERT_TRUE(flipped.ok());
  Status s = VerifyConversion(**source, **flipped, *plan, 1 << 20);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("differs from the source"), std::string_view::npos) << s.ToString();
}

TEST(ConvertCheckpoint, CarriesIteratorStateAndNonTensorEntries) {
  auto store = *OpenKvStore("memory://carry/");
  WriteAxlearnSource(store);
  ASSERT_TRUE(store->Put("src/step_00000005/tf_0/it.index", AsBytes(std::string("tf-index"))).ok());
  ASSERT_TRUE(store->Put("src/step_00000005/python_1/loader", AsBytes(std::string("msgpack"))).ok());
  ConvertCheckpointRequest r;
  r.source = "memory://carry/src/";
  r.dest = "memory://carry/dst/";
  r.to = "axlearn";
  r.options.verify = true;
  auto result = ConvertCheckpoint(r);
  ASSERT_TRUE(result.ok()) << result.status().ToString();
  EXPECT_EQ(result->source_format, "axlearn");
  EXPECT_EQ(result->dest_location, "memory://carry/dst/step_00000005/");
  auto tf = store->Get("dst/step_00000005/tf_0/it.index");
  ASSERT_TRUE(tf.ok() && tf->has_value());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*tf)->data()), (*tf)->size()), "tf-index");
  EXPECT_TRUE(store->Get("dst/step_00000005/python_1/loader")->has_value());
  // Again: refused, the step is committed.
  auto again = ConvertCheckpoint(r);
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  r.overwrite = true;
  EXPECT_TRUE(ConvertCheckpoint(r).ok());
}

TEST(ConvertPlan, RejectsCollisionsBadCastsAndEmptySelections) {
  std::vector<ArrayInfo> source = {Info("a/x", DType::kFloat32, {2}, {2}),
                                   Info("b/x", DType::kInt32, {2}, {2})};
  ConvertPlanOptions ok;
  ASSERT_TRUE(PlanConversion(source, ok).ok());  // control
  ConvertPlanOptions collide;
  collide.renames = {{"b.", "a."}};
  auto c = PlanConversion(source, collide);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("would both be written as `a.x`"), std::string_view::npos);
  ConvertPlanOptions cast;
  cast.casts = {{"b/*", DType::kBFloat16}};
  auto bad = PlanConversion(source, cast);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("cannot cast int32 to bfloat16"), std::string_view::npos);
  ConvertPlanOptions none;
  none.include = {"zzz*"};
  EXPECT_FALSE(PlanConversion(source, none).ok());
  ConvertPlanOptions exclude;
  exclude.exclude = {"a/*"};
  auto kept = PlanConversion(source, exclude);
  ASSERT_TRUE(kept.ok());
  ASSERT_EQ(kept->size(), 1u);
  EXPECT_EQ((*kept)[0].dest.path, "b.x");
}

TEST(ConvertPlan, SlabsTileTheBoxAndFit) {
  for (const Box& box : {Box({0, 0, 0}, {5, 7, 9}), Box({3, 1, 2}, {4, 1, 1000}), Box({2}, {1})}) {
    for (uint64_t max : {1u, 8u, 63u, 64u, 500u, 100000u}) {
      std::vector<Box> slabs = SplitIntoSlabs(box, 4, max);
      Index total = 0;
      Index expect_next = 0;  // slabs come in row-major order and are contiguous in the box
      for (const Box& s : slabs) {
        ASSERT_TRUE(box.Contains(s));
        EXPECT_TRUE(s.num_elements() == 1 || static_cast<uint64_t>(s.num_elements()) * 4 <= max);
        Index offset = 0, stride = 1;
        for (size_t d = box.rank(); d-- > 0;) {
          offset += (s.origin[d] - box.origin[d]) * stride;
          stride *= box.shape[d];
        }
        EXPECT_EQ(offset, expect_next);
        expect_next += s.num_elements();
        total += s.num_elements();
      }
      EXPECT_EQ(total, box.num_elements()) << box.ToString() << " max " << max;
    }
  }
  EXPECT_EQ(FitChunkShape({64, 48}, 4, 1 << 20), (Shape{64, 48}));  // control: fits
  EXPECT_EQ(FitChunkShape({64, 48}, 4, 1024), (Shape{4, 48}));
  EXPECT_EQ(FitChunkShape({64, 48}, 4, 100), (Shape{1, 24}));
  EXPECT_EQ(FitChunkShape({}, 4, 1), Shape{});
  EXPECT_EQ(ChunkBoxes({5, 4}, {2, 4}).size(), 3u);
  EXPECT_EQ(ChunkBoxes({5, 4}, {2, 4})[2], Box({4, 0}, {1, 4}));
  EXPECT_EQ(ChunkBoxes({}, {}).size(), 1u);
  EXPECT_TRUE(ChunkBoxes({0, 4}, {1, 4}).empty());
}

// A path the user wrote names exactly that directory, whatever its
// characters: '%' is not a URL escape in a path (it was: "x%41y" opened
// "xAy").
TEST(Convert, UserPathsWithUrlCharactersOpenThatDirectory) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "cairn-user-path-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  for (const std::string name : {"x%41y", "a#b", "q?r", "p|s"}) {
    const std::string dir = tmpl + "/" + name;
    std::filesystem::create_directories(dir);
    std::ofstream(dir + "/key") << name;
    std::ofstream(dir + "/m.safetensors") << "st";
    auto opened = OpenUserLocation(dir);
    ASSERT_TRUE(opened.ok()) << dir << ": " << opened.status().ToString();
    auto value = opened->store->Get("key");
    ASSERT_TRUE(value.ok()) << value.status().ToString();
    ASSERT_TRUE(value->has_value()) << dir << " opened " << opened->store->url();
    EXPECT_EQ(std::string(reinterpret_cast<const char*>((**value).data()), (**value).size()), name);
    auto file = OpenUserLocation(dir + "/m.safetensors");
    ASSERT_TRUE(file.ok()) << file.status().ToString();
    EXPECT_EQ(file->prefix, "m.safetensors");
    auto file_value = file->store->Get(file->prefix);
    ASSERT_TRUE(file_value.ok() && file_value->has_value()) << file->store->url();
  }
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace cairn::engine
