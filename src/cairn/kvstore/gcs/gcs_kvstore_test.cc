// The GCS driver: the KvStore conformance suite against fake-gcs-server
// (started once for this test binary on a free port,
// testing/emulator_server.h), resumable uploads, a missing bucket, keys
// needing escaping, and gs:// URLs with STORAGE_EMULATOR_HOST.
#include "cairn/kvstore/gcs/gcs_kvstore.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>

#include "cairn/kvstore/testing/conformance.h"
#include "cairn/kvstore/testing/emulator_server.h"
#include "cairn/kvstore/testing/emulator_store.h"
#include "cairn/kvstore/testing/get_into_check.h"
#include "cairn/kvstore/testing/list_children_check.h"
#include "cairn/kvstore/testing/own_write_check.h"
#include "cairn/kvstore/url.h"

namespace cairn::gcs {
namespace {

constexpr char kBucket[] = "cairn-gcs-conformance";

// A store on fake-gcs-server below a fresh prefix; small resumable-upload
// sizes so that the suite's 20 MiB value goes up in chunks.
std::shared_ptr<GcsKvStore> FakeGcsStore(std::string bucket = kBucket) {
  GcsOptions o;
  o.bucket = std::move(bucket);
  o.resumable_threshold = 6 << 20;
  o.upload_chunk_size = 4 << 20;
  return testing::OpenOnEmulator<GcsKvStore>(o, FakeGcsEndpoint());
}

const bool kRegistered = RegisterKvStoreConformanceTests(
    "GcsFakeServerConformance", []() -> std::shared_ptr<KvStore> { return FakeGcsStore(); });

TEST(GcsKvStoreTest, KeysNeedingEscapingRoundTrip) {
  auto store = FakeGcsStore();
  ASSERT_NE(store, nullptr);
  const std::vector<std::string> keys = {"a b/c+d", "pct%41/q?x=1#f", "amp&lt;/semi;colon",
                                         "uni/\xc3\xa9t\xc3\xa9", "tilde~/star*(1)", "eq=/ap'os\""};
  for (const std::string& k : keys) ASSERT_TRUE(store->Put(k, AsBytes("v:" + k)).ok()) << k;
  auto list = store->List();
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  std::vector<std::string> sorted = keys;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_EQ(list->size(), keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    EXPECT_EQ((*list)[i].key, sorted[i]);
    auto v = store->Get(sorted[i]);
    ASSERT_TRUE(v.ok() && v->has_value()) << sorted[i] << ": " << v.status().ToString();
    EXPECT_EQ((*v)->ToString(), "v:" + sorted[i]);
  }
}

TEST(GcsKvStoreTest, ResumableUploadsAndConditionalLargeValues) {
  auto store = FakeGcsStore();
  ASSERT_NE(store, nullptr);
  Buffer value = TestBytes((9 << 20) + 5, 3);  // 3 chunks of 4 MiB
  auto first = store->PutIfAbsent("big", value);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(*first);
  auto second = store->PutIfAbsent("big", AsBytes("small"));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_FALSE(*second);
  auto r = store->Get("big");
  ASSERT_TRUE(r.ok() && r->has_value()) << r.status().ToString();
  EXPECT_TRUE(**r == value);
}

TEST(GcsKvStoreTest, MissingBucketIsNotFoundNamingIt) {
  auto good = FakeGcsStore();
  ASSERT_NE(good, nullptr);
  GcsOptions o = good->options();
  o.bucket = "no-such-bucket-cairn";
  auto store = GcsKvStore::Open(o);
  ASSERT_TRUE(store.ok());
  auto list = (*store)->List();
  EXPECT_EQ(list.status().code(), StatusCode::kNotFound) << list.status().ToString();
  EXPECT_NE(list.status().message().find("no-such-bucket-cairn"), std::string_view::npos);
  auto get = (*store)->Get("k");
  EXPECT_EQ(get.status().code(), StatusCode::kNotFound) << get.status().ToString();
  Status put = (*store)->Put("k", AsBytes("v"));
  EXPECT_EQ(put.code(), StatusCode::kNotFound) << put.ToString();
  EXPECT_NE(put.message().find("no-such-bucket-cairn"), std::string_view::npos) << put.ToString();
  EXPECT_TRUE(good->Put("k", AsBytes("v")).ok());  // control
}

// A read of a missing key asks whether the bucket exists only until a store
// of this process has seen it exist: an OCDBT database opened on a fresh
// prefix reads its missing manifest once per save (each `cairn.save` opens
// its own store objects), and TensorStore makes no such check at all.
// Requests are counted on a client of the test's own, on a bucket no other
// test of this process uses.
TEST(GcsKvStoreTest, MissingKeysCheckTheBucketOnlyUntilItIsSeen) {
  const std::string bucket = "cairn-seen-" + std::to_string(std::random_device{}());
  auto seed = FakeGcsStore(bucket);  // creates the bucket (not a sighting)
  ASSERT_NE(seed, nullptr);
  GcsOptions o = seed->options();
  auto client = std::make_shared<http::HttpClient>();
  o.http = client;
  auto store = GcsKvStore::Open(o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  // Control: nothing known yet, so a 404 costs the object read and the
  // bucket check.
  uint64_t before = client->calls();
  auto missing = (*store)->Get("absent1");
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  EXPECT_FALSE(missing->has_value());
  EXPECT_EQ(client->calls() - before, 2u);
  // The bucket was seen: the next misses are one request each.
  before = client->calls();
  for (const char* k : {"absent2", "absent3"}) {
    auto r = (*store)->Get(k);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_FALSE(r->has_value()) << k;
  }
  EXPECT_EQ(client->calls() - before, 2u);
  // Another store object on the same bucket (another prefix, as the next
  // save opens) knows it too: its first miss is one request.
  GcsOptions other = o;
  other.prefix += "other/";
  auto second = GcsKvStore::Open(other);
  ASSERT_TRUE(second.ok());
  before = client->calls();
  auto miss2 = (*second)->Get("manifest.ocdbt");
  ASSERT_TRUE(miss2.ok()) << miss2.status().ToString();
  EXPECT_FALSE(miss2->has_value());
  EXPECT_EQ(client->calls() - before, 1u) << "a second store object checked the bucket again";
  // Must fail: a store on a bucket that does not exist still says so on
  // every read (no store saw it), also after others saw theirs.
  o.bucket = "no-such-bucket-cairn-2";
  auto gone = GcsKvStore::Open(o);
  ASSERT_TRUE(gone.ok());
  for (int i = 0; i < 2; ++i) {
    auto r = (*gone)->Get("k");
    EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();
    EXPECT_NE(r.status().message().find("no-such-bucket-cairn-2"), std::string_view::npos)
        << r.status().ToString();
  }
}

// A write shows the bucket exists too: a store that wrote, and any store
// opened after on that bucket, read a missing key with one request.
TEST(GcsKvStoreTest, AWriteShowsTheBucketExists) {
  const std::string bucket = "cairn-seen-w-" + std::to_string(std::random_device{}());
  auto seed = FakeGcsStore(bucket);
  ASSERT_NE(seed, nullptr);
  GcsOptions o = seed->options();
  auto client = std::make_shared<http::HttpClient>();
  o.http = client;
  auto fresh = GcsKvStore::Open(o);
  ASSERT_TRUE(fresh.ok());
  ASSERT_TRUE((*fresh)->Put("present", AsBytes("v")).ok());
  for (int i = 0; i < 2; ++i) {
    GcsOptions p = o;
    p.prefix += "p" + std::to_string(i) + "/";
    auto s = i == 0 ? *fresh : *GcsKvStore::Open(p);
    uint64_t before = client->calls();
    auto after_put = s->Get("absent4");
    ASSERT_TRUE(after_put.ok()) << after_put.status().ToString();
    EXPECT_FALSE(after_put->has_value());
    EXPECT_EQ(client->calls() - before, 1u) << "store " << i;
  }
}

TEST(GcsKvStoreTest, UrlOpensWithEmulatorHostAndPipelines) {
  auto base = FakeGcsStore();
  ASSERT_NE(base, nullptr);
  std::string host = base->options().endpoint.substr(std::string("http://").size());
  ASSERT_EQ(setenv("STORAGE_EMULATOR_HOST", host.c_str(), 1), 0);
  std::string url = "gs://" + std::string(kBucket) + "/" + base->options().prefix;
  auto db = OpenKvStore(url + "db/|ocdbt:");
  ASSERT_TRUE(db.ok()) << db.status().ToString();
  EXPECT_EQ((*db)->Put("inner/key", AsBytes("value")).ToString(), "OK");
  auto again = OpenKvStore(url + "db/|ocdbt:inner/");
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  auto v = (*again)->Get("key");
  ASSERT_TRUE(v.ok() && v->has_value()) << v.status().ToString();
  EXPECT_EQ((*v)->ToString(), "value");
  auto files = base->List("db/");
  ASSERT_TRUE(files.ok());
  EXPECT_FALSE(files->empty());
  for (const char* bad : {"gs://", "gs://A_B/x/", "gs://ab/", "gs://bucket/../x/"}) {
    auto r = OpenKvStore(bad);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad << ": " << r.status().ToString();
  }
  unsetenv("STORAGE_EMULATOR_HOST");
}

// A compare-and-put expecting this object's own last conditional write
// sends its generation without reading first (testing/own_write_check.h).
TEST(GcsKvStoreTest, CompareAndPutOfItsOwnWriteSkipsTheRead) {
  auto a = FakeGcsStore();
  ASSERT_NE(a, nullptr);
  auto b = GcsKvStore::Open(a->options());  // another writer of the same keys
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  http::HttpClient& client = *a->options().http;
  testing::ExpectCompareAndPutOfItsOwnWriteSkipsTheRead(*a, **b, [&] { return client.calls(); });
}

// GetInto has libcurl write the object into the caller's memory
// (testing/get_into_check.h).
TEST(GcsKvStoreTest, GetIntoWritesTheObjectInPlaceWithoutABuffer) {
  auto store = FakeGcsStore();
  ASSERT_NE(store, nullptr);
  http::HttpClient& client = *store->options().http;
  testing::ExpectGetIntoWritesTheObjectInPlace(*store, [&] { return client.calls(); });
}

// A whole-object read into fresh memory (a restore's new array) has its
// pages faulted in on the calling thread before the request is queued, not
// one by one on the transfer thread that drives every socket. Counted with
// the calling thread's own minor faults (getrusage RUSAGE_THREAD): 8 MiB of
// 4 KiB pages is 2,048 faults there; when the transfer thread took them, the
// caller took only a handful.
TEST(GcsKvStoreTest, GetIntoFaultsTheDestinationInOnTheCallingThread) {
  auto store = FakeGcsStore();
  ASSERT_NE(store, nullptr);
  constexpr size_t kBytes = size_t{8} << 20;
  std::string value(kBytes, '\0');
  for (size_t i = 0; i < kBytes; ++i) value[i] = static_cast<char>(i * 7 + (i >> 12));
  ASSERT_TRUE(store->Put("fresh", AsBytes(value)).ok());
  void* p = mmap(nullptr, kBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(p, MAP_FAILED);
  madvise(p, kBytes, MADV_NOHUGEPAGE);  // 4 KiB pages: one fault each
  rusage before{}, after{};
  getrusage(RUSAGE_THREAD, &before);
  auto r = store->GetInto("fresh", MutableByteView(static_cast<uint8_t*>(p), kBytes));
  getrusage(RUSAGE_THREAD, &after);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(*r);
  // Control: the object arrived whole, in place.
  EXPECT_EQ(std::memcmp(p, value.data(), kBytes), 0);
  const long faults = after.ru_minflt - before.ru_minflt;
  EXPECT_GE(faults, static_cast<long>(kBytes / 4096 / 2))
      << "the destination was faulted in by the transfer thread, not the caller";
  munmap(p, kBytes);
}

// ListChildren is one listing with delimiter '/': a page per 5 children
// here, not per 5 keys below them (testing/list_children_check.h).
TEST(GcsKvStoreTest, ListChildrenIsOneDelimitedListing) {
  auto seed = FakeGcsStore();
  ASSERT_NE(seed, nullptr);
  auto o = seed->options();
  o.list_page_size = 5;
  auto store = GcsKvStore::Open(o);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  http::HttpClient& client = *(*store)->options().http;
  testing::ExpectListChildrenIsOneDelimitedListing(**store, 5, [&] { return client.calls(); });
}

}  // namespace
}  // namespace cairn::gcs
