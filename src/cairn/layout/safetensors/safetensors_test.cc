#include <gtest/gtest.h>

#include <cstring>
#include <numeric>

#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/layout/safetensors/safetensors_reader.h"
#include "cairn/layout/safetensors/safetensors_writer.h"

namespace cairn::safetensors {
namespace {

using layout::ArrayInfo;

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 7 + seed);
  return v;
}

ArrayInfo Info(std::string path, DType dtype, Shape shape) {
  return ArrayInfo{std::move(path), dtype, shape, shape, 0, {}};
}

size_t Bytes(const ArrayInfo& a) { return NumElements(a.shape) * DTypeSize(a.dtype); }

// Writes every array whole, in the writer's order, and commits.
void WriteAll(SafetensorsWriter& w, const std::vector<ArrayInfo>& arrays,
              std::map<std::string, std::vector<uint8_t>>& data) {
  for (const std::string& name : w.write_order()) {
    const ArrayInfo* a = layout::FindArray(arrays, name);
    ASSERT_NE(a, nullptr);
    data[name] = Pattern(Bytes(*a), static_cast<uint8_t>(name.size()));
    ASSERT_TRUE(w.WriteBox(name, Box::FromShape(a->shape), data[name].data()).ok()) << name;
  }
  ASSERT_TRUE(w.Commit().ok());
}

std::vector<ArrayInfo> SomeArrays() {
  return {Info("a.bias", DType::kBFloat16, {7}), Info("b.scalar", DType::kFloat64, {}),
          Info("c.empty", DType::kInt8, {0, 3}), Info("d.w", DType::kFloat32, {6, 5, 4}),
          Info("e.fp8", DType::kFloat8E4M3FN, {33})};
}

TEST(Safetensors, SingleFileRoundTripAndBoxes) {
  auto store = std::make_shared<MemoryKvStore>("memory://t/");
  auto arrays = SomeArrays();
  auto w = CreateWriter(store, "out", arrays, {});
  ASSERT_TRUE(w.ok()) << w.status().ToString();
  std::map<std::string, std::vector<uint8_t>> data;
  WriteAll(**w, arrays, data);
  auto listed = store->List("");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].key, "out/model.safetensors");

  for (std::string location : {"out/model.safetensors", "out/", "out"}) {
    auto r = OpenReader(store, location);
    ASSERT_TRUE(r.ok()) << location << ": " << r.status().ToString();
    ASSERT_EQ((*r)->arrays().size(), arrays.size());
    for (const ArrayInfo& a : (*r)->arrays()) {
      const ArrayInfo* want = layout::FindArray(arrays, a.path);
      ASSERT_NE(want, nullptr);
      EXPECT_EQ(a.dtype, want->dtype);
      EXPECT_EQ(a.shape, want->shape);
      std::vector<uint8_t> got(Bytes(a));
      ASSERT_TRUE((*r)->ReadBox(a.path, Box::FromShape(a.shape), got.data()).ok());
      EXPECT_EQ(got, data[a.path]) << a.path;
    }
    // A strided box of the 3-d array: read by span, and one by runs.
    for (Box box : {Box({1, 1, 1}, {3, 2, 2}), Box({0, 0, 1}, {6, 5, 1}),
                    Box({2, 0, 0}, {2, 5, 4}), Box({5, 4, 3}, {1, 1, 1})}) {
      std::vector<uint8_t> got(box.num_elements() * 4);
      ASSERT_TRUE((*r)->ReadBox("d.w", box, got.data()).ok());
      std::vector<uint8_t> want(got.size());
      CopyBoxIntersection(data["d.w"].data(), Box::FromShape({6, 5, 4}), want.data(), box, 4);
      EXPECT_EQ(got, want) << box.ToString();
    }
    // Errors name what and where; a control read beside them succeeds.
    std::vector<uint8_t> buf(1024);
    auto outside = (*r)->ReadBox("d.w", Box({5, 0, 0}, {2, 1, 1}), buf.data());
    EXPECT_EQ(outside.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(outside.message().find("d.w"), std::string_view::npos);
    EXPECT_EQ((*r)->ReadBox("zzz", Box({}, {}), buf.data()).code(), StatusCode::kNotFound);
  }
}

TEST(Safetensors, StreamsSlabsInOrderAndRefusesOthers) {
  auto store = std::make_shared<MemoryKvStore>();
  std::vector<ArrayInfo> arrays = {Info("w", DType::kUInt16, {4, 3}), Info("x", DType::kUInt16, {2})};
  auto w = CreateWriter(store, "", arrays, {});
  ASSERT_TRUE(w.ok());
  std::vector<uint8_t> rows = Pattern(24, 1);
  // A slab that is not contiguous, then one that is not next: refused.
  auto not_contiguous = (*w)->WriteBox("w", Box({0, 0}, {2, 2}), rows.data());
  EXPECT_EQ(not_contiguous.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(not_contiguous.message().find("not the next contiguous slab"), std::string_view::npos);
  EXPECT_EQ((*w)->WriteBox("w", Box({1, 0}, {1, 3}), rows.data()).code(),
            StatusCode::kFailedPrecondition);
  // Skipping to the next tensor before this one is complete: refused.
  ASSERT_TRUE((*w)->WriteBox("w", Box({0, 0}, {1, 3}), rows.data()).ok());
  auto skip = (*w)->WriteBox("x", Box({0}, {2}), rows.data());
  EXPECT_EQ(skip.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(skip.message().find("incomplete"), std::string_view::npos);
  // Row by row, then a single element at a time: accepted.
  ASSERT_TRUE((*w)->WriteBox("w", Box({1, 0}, {2, 3}), rows.data() + 6).ok());
  for (int j = 0; j < 3; ++j) {
    ASSERT_TRUE((*w)->WriteBox("w", Box({3, j}, {1, 1}), rows.data() + 18 + 2 * j).ok());
  }
  // Nothing is visible before the commit.
  EXPECT_TRUE(store->List("")->empty());
  EXPECT_EQ((*w)->Commit().code(), StatusCode::kFailedPrecondition);  // x missing
  ASSERT_TRUE((*w)->WriteBox("x", Box({0}, {2}), rows.data()).ok());
  ASSERT_TRUE((*w)->Commit().ok());
  auto r = OpenReader(store, "model.safetensors");
  ASSERT_TRUE(r.ok());
  std::vector<uint8_t> got(24);
  ASSERT_TRUE((*r)->ReadBox("w", Box({0, 0}, {4, 3}), got.data()).ok());
  EXPECT_EQ(got, rows);
}

TEST(Safetensors, ShardedSetWithIndexCommittedLast) {
  auto store = std::make_shared<MemoryKvStore>();
  std::vector<ArrayInfo> arrays;
  for (int i = 0; i < 6; ++i) arrays.push_back(Info("layer" + std::to_string(i), DType::kFloat32, {64}));
  WriterOptions options;
  options.max_file_bytes = 600;  // two tensors of 256 bytes per file
  options.metadata = {{"format", "pt"}};
  auto w = CreateWriter(store, "hf/", arrays, options);
  ASSERT_TRUE(w.ok());
  EXPECT_EQ((*w)->file_keys(), (std::vector<std::string>{"hf/model-00001-of-00003.safetensors",
                                                         "hf/model-00002-of-00003.safetensors",
                                                         "hf/model-00003-of-00003.safetensors"}));
  std::map<std::string, std::vector<uint8_t>> data;
  for (size_t i = 0; i < 3; ++i) {  // half-way: files but no index
    const std::string& name = (*w)->write_order()[i];
    data[name] = Pattern(256, static_cast<uint8_t>(i));
    ASSERT_TRUE((*w)->WriteBox(name, Box::FromShape({64}), data[name].data()).ok());
  }
  EXPECT_FALSE(store->Get("hf/model.safetensors.index.json")->has_value());
  EXPECT_FALSE(OpenReader(store, "hf/model.safetensors.index.json").ok());
  // Nor does the directory read as a checkpoint of the files written so far.
  auto partial = OpenReader(store, "hf/");
  EXPECT_EQ(partial.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(partial.status().message().find("model-00001-of-00003.safetensors"), std::string::npos)
      << partial.status().ToString();
  EXPECT_NE(partial.status().message().find("is a file of a sharded set"), std::string::npos);
  EXPECT_NE(partial.status().message().find("incomplete"), std::string::npos);
  for (size_t i = 3; i < 6; ++i) {
    const std::string& name = (*w)->write_order()[i];
    data[name] = Pattern(256, static_cast<uint8_t>(i));
    ASSERT_TRUE((*w)->WriteBox(name, Box::FromShape({64}), data[name].data()).ok());
  }
  ASSERT_TRUE((*w)->Commit().ok());
  auto r = OpenReader(store, "hf/");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ((*r)->arrays().size(), 6u);
  for (const auto& [name, bytes] : data) {
    std::vector<uint8_t> got(256);
    ASSERT_TRUE((*r)->ReadBox(name, Box::FromShape({64}), got.data()).ok());
    EXPECT_EQ(got, bytes);
  }
}

TEST(Safetensors, HostileSetsAreRefusedWithTheirNames) {
  auto store = std::make_shared<MemoryKvStore>("memory://h/");
  std::vector<ArrayInfo> arrays = {Info("a", DType::kUInt8, {4}), Info("b", DType::kUInt8, {4})};
  WriterOptions options;
  options.max_file_bytes = 4;
  auto w = CreateWriter(store, "", arrays, options);
  ASSERT_TRUE(w.ok());
  std::map<std::string, std::vector<uint8_t>> data;
  WriteAll(**w, arrays, data);
  ASSERT_TRUE(OpenReader(store, "").ok());  // control
  auto put_index = [&](std::string text) {
    ASSERT_TRUE(store->Put("model.safetensors.index.json", AsBytes(text)).ok());
  };
  struct Case { std::string index; const char* message; };
  for (const Case& c : std::vector<Case>{
           {R"({"weight_map": {"a": "../x.safetensors"}})", "not a file beside the index"},
           {R"({"weight_map": {"a": "model-00002-of-00002.safetensors"}})", "does not hold it"},
           {R"({"weight_map": {"a": 3}})", "not a file name"},
           {R"({"nothing": 1})", "no `weight_map`"},
           {R"({"weight_map": )", "index.json"}}) {
    put_index(c.index);
    auto r = OpenReader(store, "");
    ASSERT_FALSE(r.ok()) << c.index;
    EXPECT_NE(r.status().message().find(c.message), std::string_view::npos)
        << r.status().ToString();
  }
  // A set's files without its index: an incomplete set.
  ASSERT_TRUE(store->Delete("model.safetensors.index.json").ok());
  auto incomplete = OpenReader(store, "");
  ASSERT_FALSE(incomplete.ok());
  EXPECT_NE(incomplete.status().message().find("incomplete"), std::string_view::npos);
  // The same tensor in two files without an index.
  auto copy = store->Get("model-00001-of-00002.safetensors");
  for (const char* key : {"dup/one.safetensors", "dup/two.safetensors"}) {
    ASSERT_TRUE(store->Put(key, ByteView((**copy).data(), (**copy).size())).ok());
  }
  auto dup = OpenReader(store, "dup/");
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("is in both"), std::string_view::npos);
  // A truncated file: its header runs past the end.
  auto whole = store->Get("model-00001-of-00002.safetensors");
  ASSERT_TRUE(store->Put("t/x.safetensors", ByteView((**whole).data(), 12)).ok());
  auto truncated = OpenReader(store, "t/x.safetensors");
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(truncated.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(truncated.status().message().find("t/x.safetensors"), std::string_view::npos);
  EXPECT_EQ(OpenReader(store, "nothing/").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace cairn::safetensors
