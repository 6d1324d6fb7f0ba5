// Crafted databases whose few bytes would cost huge work to read: a node
// that decodes past the configured limit, and interior entries that all
// point at one child. Each must-fail case has a control that reads fine.
#include <zstd.h>

#include <chrono>
#include <cstring>
#include <memory>

#include <gtest/gtest.h>

#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"
#include "cairn/util/coding.h"
#include "cairn/util/crc32c.h"

namespace cairn::ocdbt {
namespace {

void ExpectDataLoss(const Status& st, std::string_view needle, const std::string& what) {
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << what << ": " << st.ToString();
  EXPECT_NE(st.message().find(needle), std::string::npos)
      << what << ": message lacks `" << needle << "`: " << st.ToString();
}

// A database whose single leaf root holds 4000 inline values (about 450 KB
// decoded, a few KB compressed).
std::shared_ptr<MemoryKvStore> WideLeafDatabase() {
  auto base = std::make_shared<MemoryKvStore>("memory://wide/");
  OcdbtOptions o;
  o.config.max_inline_value_bytes = 100;
  o.config.max_decoded_node_bytes = 8 << 20;
  OcdbtKvStore store(base, o);
  std::vector<KvMutation> batch;
  for (int i = 0; i < 4000; ++i) {
    char key[16];
    std::snprintf(key, sizeof(key), "k%06d", i);
    batch.push_back({key, Buffer::CopyOf(std::string(100, 'v'))});
  }
  EXPECT_TRUE(store.ApplyBatch(std::move(batch)).ok());
  return base;
}

// Rewrites the database's manifest with another max_decoded_node_bytes.
void SetNodeLimit(KvStore& base, uint32_t limit) {
  OcdbtKvStore store(std::shared_ptr<KvStore>(&base, [](KvStore*) {}), {});
  auto m = store.ReadManifest();
  ASSERT_TRUE(m.ok() && m->has_value());
  Manifest manifest = **m;
  manifest.config.max_decoded_node_bytes = limit;
  auto encoded = EncodeManifest(manifest);
  ASSERT_TRUE(encoded.ok());
  ASSERT_TRUE(base.Put(kManifestKey, encoded->view()).ok());
}

TEST(OcdbtReadLimitsTest, NodeDecodingPastTheConfiguredLimitIsDataLoss) {
  auto base = WideLeafDatabase();
  // Control: the database's own limit (8 MiB) admits its 450 KB leaf.
  {
    OcdbtKvStore store(base, {});
    auto list = store.List();
    ASSERT_TRUE(list.ok()) << list.status().ToString();
    EXPECT_EQ(list->size(), 4000u);
    auto got = store.Get("k000123");
    ASSERT_TRUE(got.ok() && got->has_value());
  }
  // The same bytes under a config that says nodes are at most 1000 bytes:
  // the leaf is over 1000 bytes plus the room for 4 maximal entries.
  SetNodeLimit(*base, 1000);
  OcdbtKvStore store(base, {});
  ExpectDataLoss(store.List().status(), "over the limit of", "List");
  ExpectDataLoss(store.Get("k000123").status(), "over the limit of", "Get");
  ExpectDataLoss(store.GetMany({"k000001"}).status(), "over the limit of", "GetMany");
  ExpectDataLoss(store.Put("new", AsBytes("x")), "over the limit of", "commit on top");
}

TEST(OcdbtReadLimitsTest, ReaderCapAppliesWhateverTheConfigSays) {
  auto base = WideLeafDatabase();
  SetNodeLimit(*base, 0);  // "unlimited"
  OcdbtKvStore unlimited(base, {});
  EXPECT_TRUE(unlimited.List().ok());  // control: the default cap is 256 MiB
  OcdbtOptions capped;
  capped.max_node_read_bytes = 100000;
  OcdbtKvStore store(base, capped);
  ExpectDataLoss(store.List().status(), "over the limit of 100000", "List with cap");
}

TEST(OcdbtReadLimitsTest, DecompressionStopsAtTheLimit) {
  // 64 MiB of zeros compress to a few KB; decoding with a 1 MiB limit must
  // fail fast instead of producing them.
  Buffer zeros(size_t{64} << 20);
  std::memset(zeros.data(), 0, zeros.size());
  auto bomb = EncodeEnvelope(kBtreeNodeMagic, zeros.view(), {CompressionMethod::kZstd, 1});
  ASSERT_TRUE(bomb.ok());
  ASSERT_LT(bomb->size(), 64u << 10);
  auto start = std::chrono::steady_clock::now();
  auto limited = DecodeEnvelope(kBtreeNodeMagic, bomb->view(), "bomb", 1 << 20);
  auto took = std::chrono::steady_clock::now() - start;
  ExpectDataLoss(limited.status(), "over the limit of 1048576", "bomb");
  EXPECT_LT(took, std::chrono::milliseconds(200));
  // The same without a declared size (a streamed frame): decoding stops as
  // soon as the output passes the limit.
  std::unique_ptr<ZSTD_CCtx, size_t (*)(ZSTD_CCtx*)> cctx(ZSTD_createCCtx(), ZSTD_freeCCtx);
  Buffer frame(ZSTD_compressBound(zeros.size()));
  ZSTD_outBuffer out{frame.data(), frame.size(), 0};
  ZSTD_inBuffer in{zeros.data(), zeros.size(), 0};
  ASSERT_FALSE(ZSTD_isError(ZSTD_compressStream2(cctx.get(), &out, &in, ZSTD_e_continue)));
  while (ZSTD_compressStream2(cctx.get(), &out, &in, ZSTD_e_end) != 0) {
  }
  ASSERT_EQ(ZSTD_getFrameContentSize(frame.data(), out.pos), ZSTD_CONTENTSIZE_UNKNOWN);
  Buffer env;
  const uint8_t header[12] = {0x0c, 0xdb, 0x20, 0xde};
  env.append(ByteView(header, 12));
  const uint8_t version_and_zstd[2] = {0, 1};
  env.append(ByteView(version_and_zstd, 2));
  env.append(ByteView(frame.data(), out.pos));
  StoreLE64(env.data() + 4, env.size() + 4);
  AppendLE32(&env, Crc32c(env.view()));
  start = std::chrono::steady_clock::now();
  auto streamed = DecodeEnvelope(kBtreeNodeMagic, env.view(), "streamed bomb", 1 << 20);
  took = std::chrono::steady_clock::now() - start;
  ExpectDataLoss(streamed.status(), "decodes to more bytes than allowed", "streamed bomb");
  EXPECT_LT(took, std::chrono::milliseconds(200));
  auto unlimited = DecodeEnvelope(kBtreeNodeMagic, env.view(), "streamed bomb");
  ASSERT_TRUE(unlimited.ok()) << unlimited.status().ToString();  // control
  EXPECT_EQ(unlimited->size(), zeros.size());
  // Control: under a limit it fits, it decodes.
  auto small = EncodeEnvelope(kBtreeNodeMagic, zeros.view().first(1000), {});
  ASSERT_TRUE(small.ok());
  auto ok = DecodeEnvelope(kBtreeNodeMagic, small->view(), "small", 1000);
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(ok->size(), 1000u);
  ExpectDataLoss(DecodeEnvelope(kBtreeNodeMagic, small->view(), "small", 999).status(),
                 "over the limit of 999", "small over 999");
}

// A height-1 tree: root entries "a" and "b" (each contributing its first
// byte to the child's prefix) over leaves holding "k1" and "k2". With
// `shared`, both entries point at the SAME leaf bytes.
std::shared_ptr<MemoryKvStore> TwoEntryTree(bool shared) {
  auto base = std::make_shared<MemoryKvStore>("memory://shared-child/");
  BtreeNode leaf;
  leaf.height = 0;
  for (const char* k : {"k1", "k2"}) {
    LeafValue v;
    v.inline_value = std::string("value of ") + k;
    leaf.leaf_entries.push_back({k, v});
  }
  auto leaf_bytes = EncodeBtreeNode(leaf, {});
  EXPECT_TRUE(leaf_bytes.ok());
  Buffer file;
  file.append(leaf_bytes->view());
  if (!shared) file.append(leaf_bytes->view());  // a second, distinct copy
  DataFileId id{"", "d/nodes"};
  BtreeNode root;
  root.height = 1;
  for (int i = 0; i < 2; ++i) {
    InteriorEntry e;
    e.key = i == 0 ? "a" : "b";
    e.subtree_common_prefix_length = 1;
    uint64_t offset = shared ? 0 : i * leaf_bytes->size();
    e.node.location = {id, offset, leaf_bytes->size()};
    e.node.statistics = {2, leaf_bytes->size(), 0};
    root.interior_entries.push_back(e);
  }
  auto root_bytes = EncodeBtreeNode(root, {});
  EXPECT_TRUE(root_bytes.ok());
  const uint64_t root_offset = file.size();
  file.append(root_bytes->view());
  EXPECT_TRUE(base->Put(id.FullPath(), file.view()).ok());
  Manifest m;
  m.config.uuid[0] = 1;
  BtreeGenerationReference g;
  g.root.location = {id, root_offset, root_bytes->size()};
  g.root.statistics = {4, 0, 0};
  g.root_height = 1;
  g.generation_number = 1;
  g.commit_time = 1;
  m.versions.push_back(g);
  auto encoded = EncodeManifest(m);
  EXPECT_TRUE(encoded.ok()) << encoded.status().ToString();
  EXPECT_TRUE(base->Put(kManifestKey, encoded->view()).ok());
  return base;
}

TEST(OcdbtReadLimitsTest, ChildReachedTwiceIsDataLoss) {
  // Control: two distinct leaves list 4 keys and look them up.
  {
    OcdbtKvStore store(TwoEntryTree(false), {});
    auto list = store.List();
    ASSERT_TRUE(list.ok()) << list.status().ToString();
    std::vector<std::string> keys;
    for (const auto& k : *list) keys.push_back(k.key);
    EXPECT_EQ(keys, (std::vector<std::string>{"ak1", "ak2", "bk1", "bk2"}));
    auto many = store.GetMany({"ak1", "bk2"});
    ASSERT_TRUE(many.ok()) << many.status().ToString();
    EXPECT_TRUE((*many)[0].has_value() && (*many)[1].has_value());
  }
  OcdbtKvStore store(TwoEntryTree(true), {});
  ExpectDataLoss(store.List().status(), "is referenced twice", "List");
  ExpectDataLoss(store.GetMany({"ak1", "bk2"}).status(), "is referenced twice", "GetMany");
}

TEST(OcdbtReadLimitsTest, OneChildListedUnderItsOnlyPrefixIsFine) {
  // A prefix that reaches only one of the two entries never sees the
  // repetition: the listing is bounded by what it reads.
  OcdbtKvStore store(TwoEntryTree(true), {});
  auto list = store.List("b");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->size(), 2u);
  auto got = store.Get("ak1");
  ASSERT_TRUE(got.ok() && got->has_value()) << got.status().ToString();
}

}  // namespace
}  // namespace cairn::ocdbt
