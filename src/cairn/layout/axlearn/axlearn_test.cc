#include <gtest/gtest.h>

#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/layout/axlearn/axlearn_checkpoint.h"

namespace cairn::axlearn {
namespace {

std::string AsString(const std::optional<Buffer>& b) {
  return b ? std::string(reinterpret_cast<const char*>(b->data()), b->size()) : "<missing>";
}

// An index written by AXLearn (regular checkpointer, both the PyPI release
// and GitHub main write it so).
const char kAxlearnIndex[] =
    "[[\"step\", 200], [\"input_iter\", \"<class '...OwnedIterator'>\"], "
    "[\"learner/optimizer/0/count\", {\"dtype\": \"int32\", \"shape\": \"()\"}], "
    "[\"model/emb\", {\"dtype\": \"bfloat16\", \"shape\": \"(3, 5, 2)\"}], [\"note\", 42]]";

TEST(AxlearnIndex, ParsesAndFormatsAsAxlearnDoes) {
  auto index = ParseIndex(kAxlearnIndex, "index");
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  EXPECT_EQ(index->step, 200);
  ASSERT_EQ(index->entries.size(), 4u);
  EXPECT_FALSE(index->entries[0].is_tensor);
  EXPECT_TRUE(index->entries[1].is_tensor);
  EXPECT_EQ(index->entries[1].shape, Shape{});
  EXPECT_EQ(index->entries[2].dtype, DType::kBFloat16);
  EXPECT_EQ(index->entries[2].shape, (Shape{3, 5, 2}));
  EXPECT_EQ(index->entries[3].value, Json(42));
  EXPECT_EQ(FormatIndex(*index), kAxlearnIndex);
}

TEST(AxlearnIndex, TupleShapes) {
  EXPECT_EQ(*ParseTupleShape("(8,)"), Shape{8});
  EXPECT_EQ(FormatTupleShape({8}), "(8,)");
  EXPECT_EQ(FormatTupleShape({}), "()");
  EXPECT_EQ(FormatTupleShape({3, 5}), "(3, 5)");
  for (const char* bad : {"", "8", "(8", "(a)", "(1,,2)", "(-1,)", "(99999999999999999999,)"}) {
    EXPECT_FALSE(ParseTupleShape(bad).ok()) << bad;
  }
}

TEST(AxlearnIndex, RejectsMalformedIndexes) {
  ASSERT_TRUE(ParseIndex("[[\"step\", 1]]", "i").ok());  // control
  // A leaf named "step" beside the step number (AXLearn lists the step first).
  ASSERT_TRUE(ParseIndex("[[\"step\", 1], [\"step\", {\"dtype\": \"int32\", \"shape\": \"()\"}]]", "i").ok());
  struct Case { const char* text; const char* message; };
  for (const Case& c : std::vector<Case>{
           {"{}", "not a JSON list"},
           {"[[\"w\", 1]]", "no `step`"},
           {"[[\"step\", -1]]", "non-negative"},
           {"[[\"step\", 1], [\"w\"]]", "entry 1"},
           {"[[\"step\", 1], [\"w\", {\"dtype\": \"float99\", \"shape\": \"(1,)\"}]]", "float99"},
           {"[[\"step\", 1], [\"w\", {\"dtype\": \"float32\", \"shape\": \"[1]\"}]]", "tuple"},
           {"[[\"step\", 1", "AXLearn index"},
           // A path given twice (AXLearn writes a dict), a tensor or not.
           {"[[\"step\", 1], [\"w\", {\"dtype\": \"float32\", \"shape\": \"(1,)\"}], "
            "[\"w\", {\"dtype\": \"float32\", \"shape\": \"(1,)\"}]]",
            "entry 2: path `w` is already entry 1"},
           {"[[\"step\", 1], [\"note\", 1], [\"note\", 2]]", "entry 2: path `note` is already entry 1"},
           {"[[\"step\", 1], [\"step\", 2], [\"step\", 3]]", "entry 2: path `step` is already entry 1"}}) {
    auto r = ParseIndex(c.text, "ckpt/step_00000001/index");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(r.status().message().find(c.message), std::string_view::npos) << r.status().ToString();
    EXPECT_NE(r.status().message().find("step_00000001"), std::string_view::npos);
  }
}

TEST(AxlearnCheckpoint, WritesTheRegularLayoutAndReadsItBack) {
  auto store = std::make_shared<MemoryKvStore>("memory://ax/");
  std::vector<layout::ArrayInfo> arrays = {
      {"model/w", DType::kFloat32, {8, 4}, {2, 2}, 0, {}},
      {"learner/optimizer/0/count", DType::kInt32, {}, {}, 0, {}},
      {"model/emb", DType::kBFloat16, {3, 5, 2}, {3, 5, 2}, 0, {}},
      {"model/empty", DType::kFloat32, {0, 4}, {0, 4}, 0, {}},
  };
  WriterOptions options;
  options.step = 100;
  IndexEntry note;
  note.path = "note";
  note.value = 42;
  options.other_entries.push_back(note);
  auto writer = CreateWriter(store, "ckpt/" + StepDirName(100), arrays, options);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  std::vector<float> w(32);
  for (int i = 0; i < 32; ++i) w[i] = i * 0.5f;
  ASSERT_TRUE((*writer)->WriteBox("model/w", Box::FromShape({8, 4}), w.data()).ok());
  int32_t count = 7;
  ASSERT_TRUE((*writer)->WriteBox("learner/optimizer/0/count", Box::FromShape({}), &count).ok());
  std::vector<uint16_t> emb(30, 0x3f80);
  ASSERT_TRUE((*writer)->WriteBox("model/emb", Box::FromShape({3, 5, 2}), emb.data()).ok());
  // Before the commit, the step is not a checkpoint.
  EXPECT_EQ(OpenReader(store, "ckpt/step_00000100").status().code(), StatusCode::kNotFound);
  ASSERT_TRUE((*writer)->Commit().ok());

  // The .zarray exactly as JAX's TensorStore spec makes it; chunk keys "i.j".
  EXPECT_EQ(AsString(*store->Get("ckpt/step_00000100/gda/model/w/.zarray")),
            "{\"chunks\":[2,2],\"compressor\":{\"id\":\"zstd\",\"level\":1},"
            "\"dimension_separator\":\".\",\"dtype\":\"<f4\",\"fill_value\":null,"
            "\"filters\":null,\"order\":\"C\",\"shape\":[8,4],\"zarr_format\":2}");
  EXPECT_TRUE(store->Get("ckpt/step_00000100/gda/model/w/3.1")->has_value());
  EXPECT_TRUE(store->Get("ckpt/step_00000100/gda/learner/optimizer/0/count/0")->has_value());
  EXPECT_EQ(AsString(*store->Get("ckpt/step_00000100/index")),
            "[[\"step\", 100], [\"learner/optimizer/0/count\", {\"dtype\": \"int32\", \"shape\": "
            "\"()\"}], [\"model/emb\", {\"dtype\": \"bfloat16\", \"shape\": \"(3, 5, 2)\"}], "
            "[\"model/empty\", {\"dtype\": \"float32\", \"shape\": \"(0, 4)\"}], [\"model/w\", "
            "{\"dtype\": \"float32\", \"shape\": \"(8, 4)\"}], [\"note\", 42]]");

  auto reader = OpenReader(store, "ckpt/step_00000100/");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ASSERT_EQ((*reader)->arrays().size(), 4u);
  EXPECT_EQ((*reader)->arrays()[0].path, "learner/optimizer/0/count");
  std::vector<float> part(6);
  ASSERT_TRUE((*reader)->ReadBox("model/w", Box({1, 1}, {2, 3}), part.data()).ok());
  EXPECT_EQ(part, (std::vector<float>{2.5f, 3.0f, 3.5f, 4.5f, 5.0f, 5.5f}));
  int32_t got_count = 0;
  ASSERT_TRUE((*reader)->ReadBox("learner/optimizer/0/count", Box({}, {}), &got_count).ok());
  EXPECT_EQ(got_count, 7);

  // A committed step is not overwritten.
  EXPECT_EQ(CreateWriter(store, "ckpt/step_00000100", arrays, options).status().code(),
            StatusCode::kAlreadyExists);
}

TEST(AxlearnCheckpoint, ResumeKeepsOnlyArraysWhoseChunksAreAllThereAndIntact) {
  auto store = std::make_shared<MemoryKvStore>("memory://ax/");
  std::vector<layout::ArrayInfo> arrays = {
      {"a", DType::kFloat32, {4, 4}, {2, 4}, 0, {}},
      {"b", DType::kFloat32, {4, 4}, {2, 4}, 0, {}},
      {"c", DType::kFloat32, {4, 4}, {2, 4}, 0, {}},
      {"d", DType::kFloat32, {4, 4}, {2, 4}, 0, {}},
  };
  WriterOptions options;
  options.resume_token = "conversion-1";
  std::vector<float> v(16);
  for (int i = 0; i < 16; ++i) v[i] = i * 1.5f;
  {
    auto first = CreateWriter(store, "s/", arrays, options);
    ASSERT_TRUE(first.ok()) << first.status().ToString();
    for (const char* path : {"a", "b", "c"}) {
      ASSERT_TRUE((*first)->WriteBox(path, Box::FromShape({4, 4}), v.data()).ok());
    }
    ASSERT_TRUE((*first)->WriteBox("d", Box({0, 0}, {2, 4}), v.data()).ok());  // half of d
  }
  // Interrupted: b's second chunk was cut to 0 bytes, c's is not zstd.
  ASSERT_TRUE(store->Put("s/gda/b/1.0", ByteView()).ok());
  ASSERT_TRUE(store->Put("s/gda/c/1.0", AsBytes(std::string("garbage"))).ok());
  auto again = CreateWriter(store, "s/", arrays, options);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(*(*again)->ArrayComplete("a"));   // control: whole and intact
  EXPECT_FALSE(*(*again)->ArrayComplete("b"));  // a 0-byte chunk
  EXPECT_FALSE(*(*again)->ArrayComplete("c"));  // a corrupt chunk
  EXPECT_FALSE(*(*again)->ArrayComplete("d"));  // a chunk missing
  // Another conversion's leftovers are never kept, whole or not.
  WriterOptions other = options;
  other.resume_token = "conversion-2";
  auto fresh = CreateWriter(store, "s/", arrays, other);
  ASSERT_TRUE(fresh.ok());
  EXPECT_FALSE(*(*fresh)->ArrayComplete("a"));
}

TEST(AxlearnCheckpoint, IndexAndArraysMustAgree) {
  auto store = std::make_shared<MemoryKvStore>();
  std::vector<layout::ArrayInfo> arrays = {{"w", DType::kFloat32, {4}, {4}, 0, {}}};
  auto writer = CreateWriter(store, "s", arrays, {});
  ASSERT_TRUE(writer.ok());
  ASSERT_TRUE((*writer)->Commit().ok());
  ASSERT_TRUE(OpenReader(store, "s").ok());  // control
  auto put_index = [&](const std::string& text) {
    ASSERT_TRUE(store->Put("s/index", AsBytes(text)).ok());
  };
  put_index("[[\"step\", 0], [\"w\", {\"dtype\": \"float32\", \"shape\": \"(5,)\"}]]");
  auto mismatch = OpenReader(store, "s");
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("float32(5,)"), std::string_view::npos)
      << mismatch.status().ToString();
  put_index("[[\"step\", 0], [\"../../x\", {\"dtype\": \"float32\", \"shape\": \"(4,)\"}]]");
  auto escape = OpenReader(store, "s");
  ASSERT_FALSE(escape.ok());
  EXPECT_NE(escape.status().message().find("not a relative path"), std::string_view::npos);
  put_index("[[\"step\", 0], [\"v\", {\"dtype\": \"float32\", \"shape\": \"(4,)\"}]]");
  auto missing = OpenReader(store, "s");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("`v`"), std::string_view::npos);
}

}  // namespace
}  // namespace cairn::axlearn
