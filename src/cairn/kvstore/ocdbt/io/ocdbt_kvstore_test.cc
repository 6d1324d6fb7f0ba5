#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"

#include <filesystem>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "cairn/kvstore/file/file_kvstore.h"
#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/kvstore/testing/conformance.h"
#include "cairn/util/testing/testdata.h"

namespace cairn::ocdbt {
namespace {

namespace fs = std::filesystem;

OcdbtOptions MinArity() {
  OcdbtOptions o;
  o.config.max_inline_value_bytes = 2;
  o.config.max_decoded_node_bytes = 1;
  o.config.version_tree_arity_log2 = 1;
  return o;
}

std::shared_ptr<OcdbtKvStore> NewStore(std::shared_ptr<KvStore> base, OcdbtOptions o = {}) {
  return std::make_shared<OcdbtKvStore>(std::move(base), std::move(o));
}

const bool kDefault = RegisterKvStoreConformanceTests("OcdbtOverMemoryConformance", [] {
  return NewStore(std::make_shared<MemoryKvStore>("memory://ocdbt/"));
});
const bool kMinArity = RegisterKvStoreConformanceTests("OcdbtMinArityConformance", [] {
  return NewStore(std::make_shared<MemoryKvStore>("memory://ocdbt-min/"), MinArity());
});
const bool kUncompressed = RegisterKvStoreConformanceTests("OcdbtUncompressedConformance", [] {
  OcdbtOptions o;
  o.config.compression.method = CompressionMethod::kNone;
  return NewStore(std::make_shared<MemoryKvStore>("memory://ocdbt-raw/"), o);
});

using Model = std::map<std::string, std::string>;

void ExpectMatches(KvStore& store, const Model& model) {
  auto list = store.List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  std::vector<KeyInfo> want;
  for (const auto& [k, v] : model) want.push_back({k, v.size()});
  ASSERT_EQ(*list, want);
  for (const auto& [k, v] : model) {
    auto got = store.Get(k);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    ASSERT_TRUE(got->has_value()) << k;
    EXPECT_EQ((*got)->ToString(), v) << k;
  }
}

TEST(OcdbtKvStoreTest, EveryGenerationReadableAfterManyCommits) {
  for (uint8_t arity : {1, 2, 4}) {
    auto base = std::make_shared<MemoryKvStore>();
    OcdbtOptions o;
    o.config.version_tree_arity_log2 = arity;
    auto store = NewStore(base, o);
    const int n = 70;
    for (int i = 1; i <= n; ++i) {
      std::string value = "version " + std::to_string(i);
      ASSERT_TRUE(store->Put("key" + std::to_string(i), AsBytes(value)).ok());
    }
    auto manifest = store->ReadManifest();
    ASSERT_TRUE(manifest.ok() && manifest->has_value());
    EXPECT_EQ((*manifest)->latest_generation(), uint64_t(n));
    if (arity == 1) {
      EXPECT_GE((*manifest)->version_nodes.size(), 5u);
    }
    for (int g = 1; g <= n; ++g) {
      OcdbtOptions at = o;
      at.generation = g;
      auto old = NewStore(base, at);
      Model model;
      for (int j = 1; j <= g; ++j) {
        model["key" + std::to_string(j)] = "version " + std::to_string(j);
      }
      ExpectMatches(*old, model);
      EXPECT_EQ(old->Put("x", AsBytes("y")).code(), StatusCode::kFailedPrecondition);
    }
    OcdbtOptions missing = o;
    missing.generation = n + 1;
    auto none = NewStore(base, missing)->List();  // NotFound, as in TensorStore
    EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  }
}

TEST(OcdbtKvStoreTest, RandomWorkloadMatchesModel) {
  for (OcdbtOptions o : {MinArity(), OcdbtOptions{}}) {
    auto base = std::make_shared<MemoryKvStore>();
    auto store = NewStore(base, o);
    std::mt19937 rng(7);
    Model model;
    std::vector<Model> history = {{}};
    for (int step = 0; step < 60; ++step) {
      std::vector<KvMutation> batch;
      int n = 1 + rng() % 12;
      for (int i = 0; i < n; ++i) {
        std::string key = "k/" + std::to_string(rng() % 50) + (rng() % 3 ? "/x" : "");
        if (rng() % 4 == 0) {
          batch.push_back({key, std::nullopt});
          model.erase(key);
        } else {
          std::string v(rng() % 300, 'a' + step % 26);
          batch.push_back({key, Buffer::CopyOf(v)});
          model[key] = v;
        }
      }
      ASSERT_TRUE(store->ApplyBatch(std::move(batch)).ok());
      history.push_back(model);
      ExpectMatches(*store, model);
    }
    for (size_t g = 1; g < history.size(); g += 7) {
      OcdbtOptions at = o;
      at.generation = g;
      ExpectMatches(*NewStore(base, at), history[g]);
    }
    // Deleting everything leaves an empty tree that still commits.
    ASSERT_TRUE(store->DeletePrefix("").ok());
    auto list = store->List();
    ASSERT_TRUE(list.ok());
    EXPECT_TRUE(list->empty());
    ASSERT_TRUE(store->Put("again", AsBytes("1")).ok());
    ExpectMatches(*store, {{"again", "1"}});
  }
}

TEST(OcdbtKvStoreTest, LargeValuesGoOutOfLineAndRangesWork) {
  auto base = std::make_shared<MemoryKvStore>();
  auto store = NewStore(base);
  Buffer big = TestBytes(5000, 3);
  ASSERT_TRUE(store->Put("big", big.view()).ok());
  ASSERT_TRUE(store->Put("small", AsBytes("tiny")).ok());
  auto data_files = base->List("d/");
  ASSERT_TRUE(data_files.ok());
  ASSERT_EQ(data_files->size(), 2u);
  uint64_t total = 0;
  for (const auto& f : *data_files) total += f.size;
  EXPECT_GT(total, 5000u);
  auto part = store->Get("big", ByteRange::Range(100, 50));
  ASSERT_TRUE(part.ok() && part->has_value());
  EXPECT_EQ((*part)->ToString(), std::string(big.as_string_view().substr(100, 50)));
  auto suffix = store->Get("small", ByteRange::Suffix(2));
  ASSERT_TRUE(suffix.ok() && suffix->has_value());
  EXPECT_EQ((*suffix)->ToString(), "ny");
  EXPECT_EQ(store->Get("small", ByteRange::Range(3, 5)).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(OcdbtKvStoreTest, CorruptManifestAndMissingDataFileAreDataLoss) {
  auto base = std::make_shared<MemoryKvStore>();
  auto store = NewStore(base);
  ASSERT_TRUE(store->Put("a", TestBytes(1000, 1).view()).ok());
  auto manifest = base->Get("manifest.ocdbt");
  ASSERT_TRUE(manifest.ok() && manifest->has_value());
  Buffer bad = Buffer::CopyOf((*manifest)->view());
  bad.data()[bad.size() / 2] ^= 0x40;
  ASSERT_TRUE(base->Put("manifest.ocdbt", bad.view()).ok());
  EXPECT_EQ(store->Get("a").status().code(), StatusCode::kDataLoss);
  ASSERT_TRUE(base->Put("manifest.ocdbt", (*manifest)->view()).ok());
  ASSERT_TRUE(store->Get("a").ok());
  ASSERT_TRUE(base->DeletePrefix("d/").ok());
  auto got = store->Get("a");
  EXPECT_EQ(got.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("missing OCDBT data file"), std::string_view::npos);
}

TEST(OcdbtKvStoreTest, NumberedManifestKind) {
  auto base = std::make_shared<MemoryKvStore>();
  OcdbtOptions o;
  o.config.manifest_kind = ManifestKind::kNumbered;
  auto store = NewStore(base, o);
  for (int i = 1; i <= 20; ++i) {
    std::string key = StrCat("k", std::to_string(i));
    ASSERT_TRUE(store->Put(key, AsBytes(std::to_string(i))).ok());
  }
  auto keys = base->List("manifest.");
  ASSERT_TRUE(keys.ok());
  EXPECT_EQ(keys->size(), 21u);  // manifest.ocdbt + 20 numbered
  EXPECT_TRUE(base->Get(NumberedManifestKey(20))->has_value());
  auto list = store->List();
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), 20u);
  o.generation = 5;
  auto old = NewStore(base, o)->List();
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->size(), 5u);
}

// A private copy of a golden database; empty path (and a recorded failure
// naming the missing data) when the data is absent.
fs::path CopyGolden(const std::string& name) {
  auto golden = ::cairn::testing::TestdataPathOrFail("tensorstore-written/ocdbt/" + name);
  if (!golden) return {};
  const fs::path src = *golden;
  fs::path dst = fs::path(::testing::TempDir()) / ("cairn_ocdbt_" + name + "_" +
                                                   std::to_string(::getpid()));
  fs::remove_all(dst);
  fs::copy(src, dst, fs::copy_options::recursive);
  return dst;
}

TEST(OcdbtKvStoreTest, ContinuesTensorStoreWrittenDatabases) {
  for (const char* name : {"multi_version_low_arity.ocdbt", "files_min_arity.ocdbt"}) {
    fs::path dir = CopyGolden(name);
    ASSERT_FALSE(dir.empty());
    auto base = std::make_shared<FileKvStore>(dir.string());
    auto store = NewStore(base);
    auto before = store->List();
    ASSERT_TRUE(before.ok()) << before.status().ToString();
    Model model;
    for (const auto& k : *before) model[k.key] = (*store->Get(k.key))->ToString();
    auto m0 = store->ReadManifest();
    ASSERT_TRUE(m0.ok() && m0->has_value());
    const uint64_t g0 = (*m0)->latest_generation();
    for (int i = 0; i < 12; ++i) {
      std::string key = "new" + std::to_string(i);
      std::string value = std::string(i * 20, 'v');
      ASSERT_TRUE(store->Put(key, AsBytes(value)).ok());
      model[key] = value;
    }
    ASSERT_TRUE(store->Delete(before->front().key).ok());
    model.erase(before->front().key);
    ExpectMatches(*store, model);
    auto m1 = store->ReadManifest();
    ASSERT_TRUE(m1.ok() && m1->has_value());
    EXPECT_EQ((*m1)->latest_generation(), g0 + 13);
    EXPECT_EQ((*m1)->config.uuid, (*m0)->config.uuid);
    OcdbtOptions at;
    at.generation = g0;
    auto old = NewStore(base, at)->List();
    ASSERT_TRUE(old.ok());
    EXPECT_EQ(*old, *before);
    fs::remove_all(dir);
  }
}

}  // namespace
}  // namespace cairn::ocdbt
