// ZarrArray runs as many chunk reads and writes at once as its store asks
// for (KvStore::io_concurrency, object stores: their HTTP requests in
// flight), not only a few per core. The store here holds every Put and
// GetInto of a chunk until `target` of them are inside at once (or 30 s
// pass, and then the count shows the shortfall), so the test needs no timing.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/util/thread_pool.h"
#include "cairn/zarr/array.h"

namespace cairn {
namespace {

class GatedStore : public MemoryKvStore {
 public:
  GatedStore(size_t io, size_t target) : io_(io), target_(target) {}
  size_t io_concurrency() const override { return io_; }

  Status Put(std::string_view key, ByteView value) override {
    Gate(key);
    return MemoryKvStore::Put(key, value);
  }
  Result<bool> GetInto(std::string_view key, MutableByteView dst) override {
    Gate(key);
    return MemoryKvStore::GetInto(key, dst);
  }
  size_t max_inside() {
    std::lock_guard<std::mutex> lock(mu_);
    return max_inside_;
  }
  void Rearm() {
    std::lock_guard<std::mutex> lock(mu_);
    released_ = false;
    max_inside_ = 0;
  }

 private:
  void Gate(std::string_view key) {
    if (key.find("/c/") == std::string_view::npos) return;  // not a chunk
    std::unique_lock<std::mutex> lock(mu_);
    ++inside_;
    max_inside_ = std::max(max_inside_, inside_);
    if (inside_ >= target_) released_ = true;
    cv_.notify_all();
    cv_.wait_for(lock, std::chrono::seconds(30), [&] { return released_; });
    --inside_;
  }

  const size_t io_, target_;
  std::mutex mu_;
  std::condition_variable cv_;
  size_t inside_ = 0, max_inside_ = 0;
  bool released_ = false;
};

Json Metadata() {
  // 64 chunks of 16 uint32 each, stored uncompressed.
  return Json::parse(R"({"shape":[1024],"data_type":"uint32","fill_value":0,
    "chunk_grid":{"name":"regular","configuration":{"chunk_shape":[16]}},
    "codecs":[{"name":"bytes","configuration":{"endian":"little"}}]})");
}

TEST(ZarrArrayIoConcurrency, ObjectStoreGetsItsRequestsInFlight) {
  const size_t few = ThreadPool::Default().size() + 1;
  const size_t target = few + 8;
  auto store = std::make_shared<GatedStore>(/*io=*/32, target);
  auto a = ZarrArray::Create(store, "a/", ZarrFormat::kV3, Metadata());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  std::vector<uint32_t> v(1024);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint32_t>(i + 1);
  ASSERT_TRUE((*a)->Write(Box({0}, {1024}), v.data()).ok());
  EXPECT_GE(store->max_inside(), target);
  EXPECT_LE(store->max_inside(), 32u);
  store->Rearm();
  std::vector<uint32_t> back(1024);
  ASSERT_TRUE((*a)->Read(Box({0}, {1024}), back.data()).ok());
  EXPECT_EQ(back, v);
  EXPECT_GE(store->max_inside(), target);
}

TEST(ZarrArrayIoConcurrency, LocalStoresKeepAFewPerCore) {
  // Control: a store asking for nothing special gets (pool size + 1) at most.
  const size_t few = ThreadPool::Default().size() + 1;
  auto store = std::make_shared<GatedStore>(/*io=*/0, /*target=*/1);
  auto a = ZarrArray::Create(store, "a/", ZarrFormat::kV3, Metadata());
  ASSERT_TRUE(a.ok());
  std::vector<uint32_t> v(1024, 7);
  ASSERT_TRUE((*a)->Write(Box({0}, {1024}), v.data()).ok());
  EXPECT_GE(store->max_inside(), 1u);
  EXPECT_LE(store->max_inside(), few);
}

}  // namespace
}  // namespace cairn
