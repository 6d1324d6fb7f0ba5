// The streamed writer of GcsKvStore::OpenWriter against fake-gcs-server
// (gcs_writer.h): values of several chunks appended in odd sizes read back
// bit-exact with the writer never holding more than two chunks (the default
// writer of kvstore.h held the whole value: these tests fail on it), a value
// below the first chunk (the resumable threshold) is one request, the first
// chunk takes the threshold, and a writer destroyed without Commit
// leaves no object and cancels its session. (Chunks that fail in transit and
// are resumed from the session's offset: tests/python/test_streamed_uploads.py,
// through a fault proxy.)
#include "cairn/kvstore/gcs/gcs_writer.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>

#include "cairn/kvstore/testing/conformance.h"
#include "cairn/kvstore/testing/emulator_server.h"
#include "cairn/kvstore/testing/emulator_store.h"

namespace cairn::gcs {
namespace {

constexpr char kBucket[] = "cairn-gcs-writer";
constexpr uint64_t kChunk = 1 << 20;

// A store on fake-gcs-server below a fresh prefix, with its own HttpClient
// (so that its requests can be counted) and 1 MiB chunks; the first chunk
// of a writer takes `first_chunk` bytes (the resumable threshold).
std::shared_ptr<GcsKvStore> Store(uint64_t first_chunk = kChunk) {
  GcsOptions o;
  o.bucket = kBucket;
  o.upload_chunk_size = kChunk;
  o.resumable_threshold = first_chunk;
  o.http = std::make_shared<http::HttpClient>();
  return testing::OpenOnEmulator<GcsKvStore>(o, FakeGcsEndpoint(), "w");
}

// Writes `value` through a writer in appends of odd, varying sizes.
Status AppendOdd(KvWriter& w, ByteView value) {
  uint64_t offset = 0;
  for (uint64_t i = 0; offset < value.size(); ++i) {
    uint64_t n = std::min<uint64_t>(value.size() - offset, (i % 3 == 0) ? 1 : 300001 + 4093 * i);
    CAIRN_RETURN_IF_ERROR(w.Append(value.subspan(offset, n)));
    offset += n;
  }
  return Status::OK();
}

TEST(GcsWriterTest, ManyChunksInOddAppendsReadBackWithTwoChunksHeld) {
  auto store = Store();
  ASSERT_NE(store, nullptr);
  // Exactly two chunks (the last one full), and 9 chunks with a short last.
  for (uint64_t size : {2 * kChunk, 8 * kChunk + 777}) {
    Buffer value = TestBytes(size, static_cast<uint32_t>(size));
    const std::string key = "big/value" + std::to_string(size);
    auto w = store->OpenWriter(key);
    ASSERT_TRUE(w.ok()) << w.status().ToString();
    auto* gw = dynamic_cast<GcsWriter*>(w->get());
    ASSERT_NE(gw, nullptr) << "OpenWriter did not return the streamed writer";
    const uint64_t calls_before = store->options().http->calls();
    ASSERT_TRUE(AppendOdd(**w, value).ok());
    EXPECT_FALSE(gw->session_uri().empty()) << "no session opened before Commit";
    if (size > 2 * kChunk) {
      auto early = store->Get(key);
      ASSERT_TRUE(early.ok());
      EXPECT_FALSE(early->has_value()) << "visible before Commit";
    }
    Status committed = (*w)->Commit();
    ASSERT_TRUE(committed.ok()) << committed.ToString();
    const uint64_t chunks = (size + kChunk - 1) / kChunk;
    // the session + one PUT per chunk (+ the GET above)
    EXPECT_EQ(store->options().http->calls() - calls_before, 1 + chunks + (size > 2 * kChunk));
    EXPECT_LE(gw->buffered_bytes_high_water(), 2 * kChunk);
    EXPECT_LT(gw->buffered_bytes_high_water(), value.size() + 1);
    auto back = store->Get(key);
    ASSERT_TRUE(back.ok() && back->has_value()) << back.status().ToString();
    EXPECT_EQ((*back)->size(), value.size());
    EXPECT_TRUE(**back == value) << size;
  }
}

TEST(GcsWriterTest, ValueOfAtMostOneChunkIsOneRequest) {
  auto store = Store();
  ASSERT_NE(store, nullptr);
  // (A value of exactly the threshold goes as Put sends it: resumable.)
  for (uint64_t size : {uint64_t{0}, uint64_t{1000}, kChunk - 1}) {
    Buffer value = TestBytes(size, 4);
    auto w = store->OpenWriter("small");
    ASSERT_TRUE(w.ok());
    const uint64_t calls_before = store->options().http->calls();
    ASSERT_TRUE(AppendOdd(**w, value).ok());
    ASSERT_TRUE((*w)->Commit().ok());
    EXPECT_EQ(store->options().http->calls() - calls_before, 1u) << size;
    auto back = store->Get("small");
    ASSERT_TRUE(back.ok() && back->has_value()) << back.status().ToString();
    EXPECT_TRUE(**back == value) << size;
  }
}

TEST(GcsWriterTest, FirstChunkTakesTheResumableThreshold) {
  auto store = Store(3 * kChunk + 1000);  // rounded down to 3 chunks
  ASSERT_NE(store, nullptr);
  // Below the threshold: one media upload, as Put sends it.
  Buffer below = TestBytes(2 * kChunk + 3, 8);
  auto w = store->OpenWriter("below");
  ASSERT_TRUE(w.ok());
  uint64_t calls_before = store->options().http->calls();
  ASSERT_TRUE(AppendOdd(**w, below).ok());
  ASSERT_TRUE((*w)->Commit().ok());
  EXPECT_EQ(store->options().http->calls() - calls_before, 1u);
  // Above: a first chunk of 3 chunks' size, then chunks.
  Buffer above = TestBytes(6 * kChunk + 5, 9);
  w = store->OpenWriter("above");
  ASSERT_TRUE(w.ok());
  auto* gw = dynamic_cast<GcsWriter*>(w->get());
  ASSERT_NE(gw, nullptr);
  calls_before = store->options().http->calls();
  ASSERT_TRUE(AppendOdd(**w, above).ok());
  ASSERT_TRUE((*w)->Commit().ok());
  // the session + the 3 MiB first chunk + 4 chunks (the last of 5 bytes)
  EXPECT_EQ(store->options().http->calls() - calls_before, 6u);
  EXPECT_LE(gw->buffered_bytes_high_water(), 4 * kChunk);
  for (const char* key : {"below", "above"}) {
    auto back = store->Get(key);
    ASSERT_TRUE(back.ok() && back->has_value()) << back.status().ToString();
    EXPECT_TRUE(**back == (std::string(key) == "below" ? below : above)) << key;
  }
}

TEST(GcsWriterTest, AbandonedWriterLeavesNoObjectAndCancelsItsSession) {
  auto store = Store();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Put("abandoned", AsBytes("old")).ok());
  Buffer value = TestBytes(3 * kChunk + 5, 2);
  const uint64_t calls_before = store->options().http->calls();
  {
    auto w = store->OpenWriter("abandoned");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE(AppendOdd(**w, value).ok());
    EXPECT_FALSE(dynamic_cast<GcsWriter*>(w->get())->session_uri().empty());
  }
  // the session, 3 full chunks, the DELETE of the session
  EXPECT_EQ(store->options().http->calls() - calls_before, 5u);
  auto back = store->Get("abandoned");
  ASSERT_TRUE(back.ok() && back->has_value());
  EXPECT_EQ((*back)->ToString(), "old");
}

}  // namespace
}  // namespace cairn::gcs
