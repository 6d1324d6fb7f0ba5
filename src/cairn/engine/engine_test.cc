// Engine tests: planning, save/restore round trips in every storage
// variant and compression, the memory budget, several processes (threads
// standing in for them) and failure agreement.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <numeric>
#include <functional>
#include <thread>

#include "cairn/engine/byte_budget.h"
#include "cairn/engine/restore.h"
#include "cairn/engine/save.h"
#include "cairn/util/thread_pool.h"
#include "cairn/engine/save_plan.h"
#include "cairn/engine/testing/save_helpers.h"
#include "cairn/engine/testing/thread_coordinator.h"
#include "cairn/kvstore/testing/fault_kvstore.h"
#include "cairn/layout/orbax/item_store.h"
#include "cairn/layout/orbax/location.h"
#include "cairn/layout/orbax/item_writer.h"
#include "cairn/layout/orbax/step.h"

namespace cairn::engine {
namespace {
namespace fs = std::filesystem;
using orbax::KeyType;
using namespace testing;  // NOLINT: the save helpers

TEST(SavePlan, ReplicaZeroVsReplicaParallel) {
  std::vector<float> data = Iota(32);
  SaveRequest r;
  r.directory = "/nonexistent";
  r.options.chunk_byte_size = 32;  // chunk [2, 4] of the [8, 4] write shape
  SaveLeaf leaf = ArrayLeaf("w", {8, 4});
  leaf.num_replicas = 2;
  for (int replica : {0, 1}) {
    SaveRequest q = r;
    SaveLeaf l = leaf;
    l.shards = {Shard(data, {8, 4}, Box({0, 0}, {8, 4}), replica)};
    q.leaves = {l};
    q.options.replica_parallel = true;
    auto parallel = PlanSave(q);
    ASSERT_TRUE(parallel.ok()) << parallel.status().ToString();
    ASSERT_EQ(parallel->arrays.size(), 1u);
    EXPECT_EQ(parallel->arrays[0].chunk_shape, (Shape{2, 4}));
    ASSERT_EQ(parallel->arrays[0].pieces.size(), 1u);
    EXPECT_EQ(parallel->arrays[0].pieces[0].box, Box({4 * replica, 0}, {4, 4}));
    EXPECT_EQ(parallel->bytes, 64u);
    q.options.replica_parallel = false;
    auto zero = PlanSave(q);
    ASSERT_TRUE(zero.ok());
    EXPECT_EQ(zero->arrays[0].chunk_shape, (Shape{2, 4}));  // same grid either way
    EXPECT_EQ(zero->arrays[0].pieces.size(), replica == 0 ? 1u : 0u);
    EXPECT_EQ(zero->bytes, replica == 0 ? 128u : 0u);
  }
  // A shard of one chunk cannot be split: replica 0 writes it whole.
  SaveRequest q = r;
  q.options.chunk_byte_size = 0;
  SaveLeaf l = leaf;
  l.shards = {Shard(data, {8, 4}, Box({0, 0}, {8, 4}), 1)};
  q.leaves = {l};
  auto plan = PlanSave(q);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->arrays[0].pieces.empty());
}

TEST(SavePlan, RejectsShardsMisalignedWithTheChunkGrid) {
  std::vector<float> data = Iota(32);
  SaveRequest r;
  r.directory = "/ckpt";
  SaveLeaf leaf = ArrayLeaf("w", {8, 4}, {2, 4});
  leaf.shards = {Shard(data, {8, 4}, Box({2, 0}, {2, 4}))};
  r.leaves = {leaf};
  ASSERT_TRUE(PlanSave(r).ok());  // control: on the grid
  r.leaves[0].shards = {Shard(data, {8, 4}, Box({1, 0}, {2, 4}))};
  auto bad = PlanSave(r);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("params.w"), std::string_view::npos) << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("not aligned with the chunk grid"), std::string_view::npos);
  r.leaves[0].shards = {Shard(data, {8, 4}, Box({6, 0}, {4, 4}))};
  auto outside = PlanSave(r);
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.status().message().find("outside"), std::string_view::npos);
}

TEST(ByteBudget, BlocksUntilBytesAreReleased) {
  ByteBudget budget(100);
  budget.Acquire(60);
  EXPECT_FALSE(budget.TryAcquire(50));
  std::thread t([&] { budget.Acquire(50); });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(budget.in_use(), 60u);
  budget.Release(60);
  t.join();
  EXPECT_EQ(budget.in_use(), 50u);
  EXPECT_LE(budget.peak(), 100u);
  budget.Release(50);
  budget.Acquire(500);  // larger than the budget: granted alone
  EXPECT_EQ(budget.in_use(), 500u);
  EXPECT_FALSE(budget.TryAcquire(1));
  budget.Release(500);
  EXPECT_TRUE(budget.TryAcquire(100));
}

struct Variant {
  bool ocdbt;
  bool zarr3;
  Compression compression;
};

std::string Name(const Variant& v) {
  const char* c = v.compression == Compression::kNone ? "none"
                  : v.compression == Compression::kAuto ? "auto" : "default";
  return std::string(v.ocdbt ? "ocdbt_" : "dir_") + (v.zarr3 ? "zarr3_" : "zarr2_") + c;
}

class RoundTrip : public ::testing::TestWithParam<Variant> {};

TEST_P(RoundTrip, SavesAndRestoresOntoAnotherSharding) {
  const Variant v = GetParam();
  const std::string dir = TempDir("rt_" + Name(v)) + "/item";
  std::vector<float> w = Iota(7 * 5, 1.5f);  // 7 rows, chunks of 2 rows: an edge chunk
  std::vector<float> zeros(64, 0.0f);        // compresses: auto keeps zstd
  SaveRequest r;
  r.directory = dir;
  r.options.use_ocdbt = v.ocdbt;
  r.options.use_zarr3 = v.zarr3;
  r.options.compression = v.compression;
  SaveLeaf lw = ArrayLeaf("w", {7, 5}, {2, 5});
  for (Index row = 0; row < 7; row += 2) {
    lw.shards.push_back(Shard(w, {7, 5}, Box({row, 0}, {std::min<Index>(2, 7 - row), 5})));
  }
  SaveLeaf lz = ArrayLeaf("z", {8, 8});
  lz.value_type = std::string(orbax::kNumpyArray);
  lz.shards = {Shard(zeros, {8, 8}, Box({0, 0}, {8, 8}))};
  SaveLeaf name;
  name.path = {{"name", KeyType::kDict}};
  name.value_type = std::string(orbax::kString);
  name.string_value = "cairn";
  r.leaves = {name, lw, lz};
  auto coordinator = NewSingleProcessCoordinator();
  ASSERT_TRUE(Save(r, *coordinator).ok());
  ASSERT_TRUE(std::filesystem::is_regular_file(dir + "/commit_success.txt"));
  ASSERT_FALSE(fs::exists(dir + ".orbax-checkpoint-tmp"));

  // Restore a box that cuts across chunks, into a strided (column-major) buffer.
  std::vector<float> got(3 * 4, -1), all(7 * 5, -1), z(64, 7);
  RestoreRequest q;
  q.directory = dir;
  ArrayToRestore a;
  a.param = "params.w";
  a.dtype = DType::kFloat32;
  a.boxes.push_back({Box({1, 1}, {3, 4}), got.data(), FStrides(Shape{3, 4}, sizeof(float))});
  a.boxes.push_back({Box({0, 0}, {7, 5}), all.data(), {}});
  ArrayToRestore b;
  b.param = "params.z";
  b.boxes.push_back({Box({0, 0}, {8, 8}), z.data(), {}});
  q.arrays = {a, b};
  Status s = Restore(q);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(all, w);
  EXPECT_EQ(z, zeros);
  for (Index i = 0; i < 3; ++i) {
    for (Index j = 0; j < 4; ++j) EXPECT_EQ(got[j * 3 + i], w[(i + 1) * 5 + (j + 1)]);
  }
  // What is on disk: the layout's reader agrees on variant and metadata.
  auto item = orbax::OpenItem(Loc(dir));
  ASSERT_TRUE(item.ok()) << item.status().ToString();
  EXPECT_EQ(item->use_ocdbt, v.ocdbt);
  EXPECT_EQ(item->use_zarr3, v.zarr3);
  EXPECT_EQ(item->strings.at("name"), "cairn");
  auto arr = orbax::OpenItemArray(*item, "params.w");
  ASSERT_TRUE(arr.ok());
  EXPECT_EQ((*arr)->metadata().chunk_shape, (Shape{2, 5}));
  const std::string md = (*arr)->metadata().ToJsonString();
  // Uncompressed chunks still carry a checksum: zarr3's crc32c codec; for
  // zarr2, zstd frames of raw blocks (the `.zarray` says zstd).
  const bool has_zstd = md.find("zstd") != std::string::npos;
  const bool has_crc32c_codec = md.find("\"codecs\":[{\"configuration\":{\"endian\":\"little\"},\"name\":\"bytes\"},"
                                        "{\"name\":\"crc32c\"}]") != std::string::npos;
  EXPECT_EQ(has_zstd, v.compression == Compression::kOrbaxDefault || !v.zarr3) << md;  // iota floats barely compress
  EXPECT_EQ(has_crc32c_codec, v.compression != Compression::kOrbaxDefault && v.zarr3) << md;
  auto zarr = orbax::OpenItemArray(*item, "params.z");
  ASSERT_TRUE(zarr.ok());
  EXPECT_EQ((*zarr)->metadata().ToJsonString().find("zstd") != std::string::npos,
            v.compression != Compression::kNone || !v.zarr3);
  // A missing param fails with the param and item named (control above).
  q.arrays = {a};
  q.arrays[0].param = "params.nope";
  Status missing = Restore(q);
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_NE(missing.message().find("params.nope"), std::string_view::npos) << missing.ToString();
}

INSTANTIATE_TEST_SUITE_P(
    Variants, RoundTrip,
    ::testing::Values(Variant{true, true, Compression::kOrbaxDefault}, Variant{true, false, Compression::kOrbaxDefault},
                      Variant{false, true, Compression::kOrbaxDefault}, Variant{false, false, Compression::kOrbaxDefault},
                      Variant{true, true, Compression::kNone}, Variant{true, false, Compression::kNone},
                      Variant{false, true, Compression::kNone}, Variant{false, false, Compression::kNone},
                      Variant{true, true, Compression::kAuto}, Variant{false, false, Compression::kAuto}),
    [](const auto& info) { return Name(info.param); });

// The engine writes the same metadata files as the layout's own writer.
TEST(Save, MetadataMatchesTheLayoutWriter) {
  for (bool zarr3 : {true, false}) {
    const std::string root = TempDir(std::string("same_") + (zarr3 ? "3" : "2"));
    std::vector<float> w = Iota(24);
    SaveRequest r;
    r.directory = root + "/engine";
    r.options.use_zarr3 = zarr3;
    SaveLeaf l = ArrayLeaf("w", {4, 6}, {2, 6});
    l.shards = {Shard(w, {4, 6}, Box({0, 0}, {4, 6}))};
    l.sharding_json = R"({"sharding_type": "SingleDeviceSharding", "device_str": "cpu:0"})";
    r.leaves = {l};
    auto coordinator = NewSingleProcessCoordinator();
    ASSERT_TRUE(Save(r, *coordinator).ok());

    orbax::LeafToWrite lw;
    lw.path = l.path;
    lw.value_type = l.value_type;
    lw.shape = l.shape;
    lw.write_shape = l.write_shape;
    lw.sharding_json = l.sharding_json;
    lw.shards = {{Box({0, 0}, {4, 6}), w.data()}};
    orbax::ItemWriteOptions o;
    o.use_zarr3 = zarr3;
    const std::string layout_dir = root + "/layout";
    ASSERT_TRUE(orbax::WriteItemShards(Loc(layout_dir), {lw}, o).ok());
    ASSERT_TRUE(orbax::FinalizeItem(Loc(layout_dir), {lw}, o).ok());
    for (const char* f : {"_METADATA", "_sharding", "array_metadatas/process_0"}) {
      auto a = orbax::ReadSmallFile(Loc(r.directory), f);
      auto b = orbax::ReadSmallFile(Loc(layout_dir), f);
      ASSERT_TRUE(a.ok() && b.ok()) << f;
      EXPECT_EQ(*a, *b) << f;
    }
    auto ia = orbax::OpenItem(Loc(r.directory));
    auto ib = orbax::OpenItem(Loc(layout_dir));
    ASSERT_TRUE(ia.ok() && ib.ok());
    const std::string key = std::string("params.w/") + (zarr3 ? "zarr.json" : ".zarray");
    auto ma = ia->store->Get(key);
    auto mb = ib->store->Get(key);
    ASSERT_TRUE(ma.ok() && mb.ok() && *ma && *mb);
    EXPECT_EQ((*ma)->ToString(), (*mb)->ToString());
    const std::string chunk = zarr3 ? "params.w/c/1/0" : "params.w/1.0";
    auto ca = ia->store->Get(chunk);
    auto cb = ib->store->Get(chunk);
    ASSERT_TRUE(ca.ok() && cb.ok() && *ca && *cb);
    EXPECT_EQ((*ca)->ToString(), (*cb)->ToString());
  }
}

TEST(Save, PeakOwnedBytesStayWithinTheBudget) {
  const std::string dir = TempDir("budget") + "/item";
  std::vector<float> w(1 << 18);  // 1 MiB
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 977) * 0.25f;
  SaveRequest r;
  r.directory = dir;
  r.options.chunk_byte_size = 16 << 10;  // 64 chunks of 16 KiB
  SaveLeaf l = ArrayLeaf("w", {512, 512});
  l.shards = {Shard(w, {512, 512}, Box({0, 0}, {512, 512}))};
  r.leaves = {l};
  ByteBudget budget(64 << 10);
  auto coordinator = NewSingleProcessCoordinator();
  auto pending = StartSave(r, *coordinator, &budget);
  ASSERT_TRUE(pending.ok()) << pending.status().ToString();
  std::fill(w.begin(), w.end(), -1.0f);  // the caller's buffer is free once StartSave returns
  Status s = (*pending)->Wait();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE((*pending)->done());
  EXPECT_GT(budget.peak(), 16u << 10);
  // Snapshots stay within the budget; encoders running overdraw it by one
  // chunk's working memory each (the encoded bytes: 16 KiB + 1/64 + 4 KiB).
  const uint64_t working = (16u << 10) + (16u << 10) / 64 + 4096;
  EXPECT_LE(budget.peak(), (64u << 10) + ThreadPool::Default().size() * working);
  EXPECT_EQ(budget.in_use(), 0u);
  std::vector<float> back(w.size());
  RestoreRequest q;
  q.directory = dir;
  q.arrays = {{"params.w", std::nullopt, {{Box({0, 0}, {512, 512}), back.data(), {}}}, {}}};
  ASSERT_TRUE(Restore(q).ok());
  for (size_t i = 0; i < back.size(); i += 4099) EXPECT_EQ(back[i], static_cast<float>(i % 977) * 0.25f);
}

// An immutable shard (a jax.Array's buffer) is not snapshotted before
// StartSave returns: it returns while the budget is exhausted, which would
// block a snapshot, and the background reads it chunk by chunk once bytes
// are free, within the same budget.
TEST(Save, ImmutableShardsAreReadInTheBackgroundWithinTheBudget) {
  const std::string dir = TempDir("immutable") + "/item";
  std::vector<float> w(1 << 18);  // 1 MiB
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 977) * 0.5f;
  SaveRequest r;
  r.directory = dir;
  r.options.chunk_byte_size = 16 << 10;
  SaveLeaf l = ArrayLeaf("w", {512, 512});
  l.shards = {Shard(w, {512, 512}, Box({0, 0}, {512, 512}))};
  l.shards[0].immutable = true;
  // A second array held column-major: its chunks are not contiguous in the
  // buffer, so the background copies them (within the budget) first.
  std::vector<float> f(64 * 256);  // f[col * 64 + row] = row * 256 + col
  for (Index row = 0; row < 64; ++row) {
    for (Index col = 0; col < 256; ++col) f[col * 64 + row] = static_cast<float>(row * 256 + col);
  }
  SaveLeaf lf = ArrayLeaf("f", {64, 256});
  ShardToSave fs;
  fs.box = Box({0, 0}, {64, 256});
  fs.data = f.data();
  fs.byte_strides = FStrides(Shape{64, 256}, sizeof(float));
  fs.immutable = true;
  lf.shards = {fs};
  r.leaves = {l, lf};
  ByteBudget budget(64 << 10);
  budget.Acquire(64 << 10);  // the budget is full until the test releases it
  auto coordinator = NewSingleProcessCoordinator();
  auto pending = StartSave(r, *coordinator, &budget);
  ASSERT_TRUE(pending.ok()) << pending.status().ToString();
  EXPECT_FALSE((*pending)->done());
  EXPECT_EQ(budget.in_use(), uint64_t{64} << 10);  // nothing snapshotted
  budget.Release(64 << 10);
  Status s = (*pending)->Wait();
  ASSERT_TRUE(s.ok()) << s.ToString();
  const uint64_t working = (16u << 10) + (16u << 10) / 64 + 4096;
  EXPECT_LE(budget.peak(), (64u << 10) + ThreadPool::Default().size() * working);
  EXPECT_EQ(budget.in_use(), 0u);
  std::vector<float> back(w.size(), -1.0f);
  RestoreRequest q;
  q.directory = dir;
  std::vector<float> fback(64 * 256, -1.0f);
  q.arrays = {{"params.w", std::nullopt, {{Box({0, 0}, {512, 512}), back.data(), {}}}, {}},
              {"params.f", std::nullopt, {{Box({0, 0}, {64, 256}), fback.data(), {}}}, {}}};
  ASSERT_TRUE(Restore(q).ok());
  EXPECT_EQ(back, w);
  for (size_t i = 0; i < fback.size(); ++i) ASSERT_EQ(fback[i], static_cast<float>(i)) << i;
}

// Three threads as three processes: a sharded array (each process its own
// rows) and a replicated one (replica-parallel: each process a slice).
SaveRequest ProcessRequest(const std::string& dir, int p, const std::vector<float>& sharded,
                           const std::vector<float>& replicated) {
  SaveRequest r;
  r.directory = dir;
  r.item_name = "default";
  SaveLeaf a = ArrayLeaf("sharded", {12, 4}, {4, 4});
  a.shards = {Shard(sharded, {12, 4}, Box({4 * p, 0}, {4, 4}))};
  SaveLeaf b = ArrayLeaf("replicated", {6, 2}, {2, 2});
  b.num_replicas = 3;
  b.shards = {Shard(replicated, {6, 2}, Box({0, 0}, {6, 2}), p)};
  r.leaves = {a, b};
  return r;
}

// Runs `fn(p)` for processes 0..n-1 of `group`, each on its own thread, and
// returns their results.
std::vector<Status> OnEveryProcess(int n, const std::function<Status(int)>& fn) {
  std::vector<Status> results(n);
  std::vector<std::thread> threads;
  for (int p = 0; p < n; ++p) threads.emplace_back([&, p] { results[p] = fn(p); });
  for (auto& t : threads) t.join();
  return results;
}

TEST(Save, ThreeProcessesWriteTheirOwnShardsAndThePrimaryCommits) {
  const std::string dir = TempDir("mp") + "/7";
  std::vector<float> sharded = Iota(48), replicated = Iota(12, 100);
  testing::ThreadGroup group(3);
  std::vector<Status> results = OnEveryProcess(3, [&](int p) {
    return Save(ProcessRequest(dir, p, sharded, replicated), group.Member(p));
  });
  for (int p = 0; p < 3; ++p) ASSERT_TRUE(results[p].ok()) << p << ": " << results[p].ToString();
  const std::string item = dir + "/default";
  ASSERT_TRUE(std::filesystem::is_regular_file(dir + "/_CHECKPOINT_METADATA"));
  ASSERT_TRUE(std::filesystem::is_regular_file(item + "/commit_success.txt"));
  // Each process's database holds exactly its chunks.
  for (int p = 0; p < 3; ++p) {
    auto store = orbax::OpenItemWriteStore(Loc(item), true, p, 3);
    ASSERT_TRUE(store.ok());
    auto keys = (*store)->List("params.");
    ASSERT_TRUE(keys.ok());
    std::vector<std::string> names;
    for (const auto& k : *keys) names.push_back(k.key);
    std::vector<std::string> want = {"params.replicated/c/" + std::to_string(p) + "/0",
                                     "params.sharded/c/" + std::to_string(p) + "/0"};
    if (p == 0) want = {"params.replicated/c/0/0", "params.replicated/zarr.json", "params.sharded/c/0/0",
                        "params.sharded/zarr.json"};
    EXPECT_EQ(names, want) << p;
  }
  std::vector<float> a(48), b(12);
  RestoreRequest q;
  q.directory = dir;  // a step directory
  q.arrays = {{"params.sharded", std::nullopt, {{Box({0, 0}, {12, 4}), a.data(), {}}}, {}},
              {"params.replicated", std::nullopt, {{Box({0, 0}, {6, 2}), b.data(), {}}}, {}}};
  Status s = Restore(q);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(a, sharded);
  EXPECT_EQ(b, replicated);
}

TEST(Save, AFailedWriteOnOneProcessFailsEveryProcessAndCommitsNothing) {
  const std::string dir = TempDir("mpfail") + "/8";
  std::vector<float> sharded = Iota(48), replicated = Iota(12, 100);
  testing::ThreadGroup group(3);
  std::vector<Status> results = OnEveryProcess(3, [&](int p) {
    SaveHooks hooks;
    if (p == 1) {
      hooks.wrap_process_store = [](std::shared_ptr<KvStore> base) -> std::shared_ptr<KvStore> {
        auto f = std::make_shared<FaultKvStore>(base);
        f->FailWritesFrom(0, ResourceExhaustedError("injected: disk full"));
        return f;
      };
    }
    auto pending = StartSave(ProcessRequest(dir, p, sharded, replicated), group.Member(p), nullptr, hooks);
    return pending.ok() ? (*pending)->Wait() : pending.status();
  });
  for (int p = 0; p < 3; ++p) {
    EXPECT_EQ(results[p].code(), StatusCode::kResourceExhausted) << p << ": " << results[p].ToString();
    EXPECT_NE(results[p].message().find("process 1"), std::string_view::npos) << results[p].ToString();
    EXPECT_NE(results[p].message().find("injected: disk full"), std::string_view::npos);
  }
  EXPECT_FALSE(fs::exists(dir));
  // Never renamed, and abandoned (step 5 of layout/orbax/step.h): the
  // save's temporary directory is gone too.
  bool tmp_left = false;
  const fs::path final_path(dir);
  for (const auto& e : fs::directory_iterator(final_path.parent_path())) {
    tmp_left |= e.path().filename().string().rfind(
                    final_path.filename().string() + ".orbax-checkpoint-tmp-", 0) == 0;
  }
  EXPECT_FALSE(tmp_left);
}

TEST(Save, ExistingDirectoryFailsOnEveryProcessBeforeWriting) {
  const std::string dir = TempDir("exists");
  // A directory with something in it is a checkpoint already (an empty one
  // is taken over, as the layout's BeginCommit does).
  { std::ofstream(dir + "/_CHECKPOINT_METADATA") << "{}"; }
  testing::ThreadGroup group(2);
  std::vector<float> sharded = Iota(48), replicated = Iota(12);
  std::vector<Status> results = OnEveryProcess(2, [&](int p) {
    SaveRequest r;
    r.directory = dir;
    SaveLeaf l = ArrayLeaf("w", {12, 4}, {4, 4});
    l.shards = {Shard(sharded, {12, 4}, Box({4 * p, 0}, {4, 4}))};
    r.leaves = {l};
    return Save(r, group.Member(p));
  });
  for (int p = 0; p < 2; ++p) {
    EXPECT_EQ(results[p].code(), StatusCode::kAlreadyExists) << results[p].ToString();
    EXPECT_NE(results[p].message().find("process 0"), std::string_view::npos);
  }
}

TEST(Save, ACallerCommittedItemIsWrittenInPlaceWithoutCommitFiles) {
  // Orbax's CheckpointManager hands cairn's handler the item directory it
  // made and commits the step itself: two processes write into it in place.
  const std::string dir = TempDir("caller_commits") + "/step.orbax-checkpoint-tmp-1/items";
  fs::create_directories(dir);
  testing::ThreadGroup group(2);
  std::vector<float> sharded = Iota(48);
  std::vector<Status> results = OnEveryProcess(2, [&](int p) {
    SaveRequest r;
    r.directory = dir;
    r.caller_commits = true;
    SaveLeaf l = ArrayLeaf("w", {12, 4}, {6, 4});
    l.shards = {Shard(sharded, {12, 4}, Box({6 * p, 0}, {6, 4}))};
    r.leaves = {l};
    return Save(r, group.Member(p));
  });
  for (const Status& s : results) ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(fs::exists(dir + "/_METADATA"));
  EXPECT_TRUE(fs::exists(dir + "/manifest.ocdbt"));
  EXPECT_TRUE(fs::exists(dir + "/ocdbt.process_1"));
  EXPECT_FALSE(fs::exists(dir + "/commit_success.txt"));
  EXPECT_FALSE(fs::exists(dir + "/_CHECKPOINT_METADATA"));
  for (const auto& e : fs::directory_iterator(fs::path(dir).parent_path())) {
    EXPECT_EQ(e.path().filename(), "items") << "nothing beside the item: " << e.path();
  }
  std::vector<float> back(48, -1.0f);
  RestoreRequest rr;
  rr.directory = dir;
  ArrayToRestore a;
  a.param = "params.w";
  a.boxes.push_back({Box({0, 0}, {12, 4}), back.data(), {}});
  rr.arrays.push_back(std::move(a));
  ASSERT_TRUE(Restore(rr).ok());
  EXPECT_EQ(back, sharded);

  SaveRequest named;
  named.directory = dir + "2";
  named.caller_commits = true;
  named.item_name = "x";
  auto coordinator = NewSingleProcessCoordinator();
  EXPECT_EQ(Save(named, *coordinator).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cairn::engine
