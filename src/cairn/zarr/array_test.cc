#include "cairn/zarr/array.h"

#include <cmath>
#include <cstring>
#include <mutex>
#include <random>

#include <gtest/gtest.h>

#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/util/crc32c.h"

namespace cairn {
namespace {

// Records every Get (key and range) passed to a base store.
class RecordingKvStore : public KvStore {
 public:
  explicit RecordingKvStore(std::shared_ptr<KvStore> base) : base_(std::move(base)) {}
  Result<std::optional<Buffer>> Get(std::string_view key, const ByteRange& range) override {
    std::lock_guard<std::mutex> lock(mu_);
    gets_.push_back(std::string(key) + " " + range.ToString());
    return base_->Get(key, range);
  }
  Status Put(std::string_view key, ByteView value) override { return base_->Put(key, value); }
  Result<bool> PutIfAbsent(std::string_view key, ByteView value) override {
    return base_->PutIfAbsent(key, value);
  }
  Status Delete(std::string_view key) override { return base_->Delete(key); }
  Result<std::vector<KeyInfo>> List(std::string_view prefix) override {
    return base_->List(prefix);
  }
  std::string url() const override { return base_->url(); }
  std::vector<std::string> TakeGets() {
    std::lock_guard<std::mutex> lock(mu_);
    return std::exchange(gets_, {});
  }

 private:
  std::shared_ptr<KvStore> base_;
  std::mutex mu_;
  std::vector<std::string> gets_;
};

Json J(std::string_view text) {
  auto j = ParseJson(text, "test");
  EXPECT_TRUE(j.ok());
  return j.ok() ? *j : Json();
}

std::shared_ptr<MemoryKvStore> NewStore() { return std::make_shared<MemoryKvStore>("memory://t/"); }

std::string Get(KvStore& store, const std::string& key) {
  auto v = store.Get(key);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() && *v ? (*v)->ToString() : std::string("<missing>");
}

// A C-order reference copy of an int32 array, updated alongside writes.
struct Reference {
  Shape shape;
  std::vector<int32_t> data;
  Reference(Shape s, int32_t fill) : shape(std::move(s)), data(NumElements(shape), fill) {}
  void Write(const Box& box, const std::vector<int32_t>& v) {
    CopyBoxIntersection(v.data(), box, data.data(), Box::FromShape(shape), sizeof(int32_t));
  }
  std::vector<int32_t> Read(const Box& box) const {
    std::vector<int32_t> out(NumElements(box.shape));
    CopyBoxIntersection(data.data(), Box::FromShape(shape), out.data(), box, sizeof(int32_t));
    return out;
  }
};

Box RandomBox(std::mt19937& rng, const Shape& shape) {
  Box b;
  for (Index d : shape) {
    Index lo = std::uniform_int_distribution<Index>(0, d - 1)(rng);
    Index hi = std::uniform_int_distribution<Index>(lo + 1, d)(rng);
    b.origin.push_back(lo);
    b.shape.push_back(hi - lo);
  }
  return b;
}

// Random boxes written and read back, checked against a reference copy.
void RandomRoundTrip(ZarrFormat format, const Json& metadata, uint32_t seed) {
  auto store = NewStore();
  auto array = ZarrArray::Create(store, "a/", format, metadata);
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  const Shape shape = (*array)->shape();
  Reference ref(shape, 0);
  std::mt19937 rng(seed);
  for (int iter = 0; iter < 12; ++iter) {
    const Box box = RandomBox(rng, shape);
    std::vector<int32_t> v(NumElements(box.shape));
    for (auto& x : v) x = static_cast<int32_t>(rng() % 1000) - 500;
    if (iter % 4 == 3) std::fill(v.begin(), v.end(), 0);  // fill-valued writes
    ASSERT_TRUE((*array)->Write(box, v.data()).ok());
    ref.Write(box, v);
    const Box rbox = RandomBox(rng, shape);
    std::vector<int32_t> got(NumElements(rbox.shape), 12345);
    Status s = (*array)->Read(rbox, got.data());
    ASSERT_TRUE(s.ok()) << s.ToString();
    ASSERT_EQ(got, ref.Read(rbox)) << DumpJson(metadata) << " iter " << iter;
  }
  // A fresh handle sees the same data.
  auto reopened = ZarrArray::Open(store, "a/");
  ASSERT_TRUE(reopened.ok()) << reopened.status().ToString();
  std::vector<int32_t> all(NumElements(shape));
  ASSERT_TRUE((*reopened)->Read(Box::FromShape(shape), all.data()).ok());
  EXPECT_EQ(all, ref.data);
}

TEST(ZarrArrayTest, RandomRoundTrips) {
  // `shape`, then `chunk_grid` with `chunk`, then any other members.
  auto v3 = [](const char* shape, const char* chunk, const char* rest) {
    return std::string(R"({"data_type":"int32","shape":)") + shape +
           R"(,"chunk_grid":{"name":"regular","configuration":{"chunk_shape":)" + chunk + "}}" +
           rest + "}";
  };
  const std::string v3_cases[] = {
      v3("[]", "[]", ""),
      v3("[17]", "[5]", ""),
      v3("[7,6,5,4,3]", "[3,4,2,4,2]", R"(,"codecs":[{"name":"zstd"}])"),
      v3("[9,10]", "[4,3]",
         R"(,"codecs":[{"name":"transpose","configuration":{"order":[1,0]}},)"
         R"({"name":"bytes","configuration":{"endian":"big"}},{"name":"crc32c"}])"),
      v3("[9,10]", "[8,6]",
         R"(,"codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[4,3],)"
         R"("codecs":[{"name":"gzip"}]}}])"),
      v3("[9,10]", "[8,6]",
         R"(,"codecs":[{"name":"sharding_indexed","configuration":{"chunk_shape":[2,3],)"
         R"("index_location":"start"}}])"),
      v3("[9,10]", "[8,6]",
         R"(,"chunk_key_encoding":{"name":"v2"},"codecs":[{"name":"transpose",)"
         R"("configuration":{"order":[1,0]}},{"name":"sharding_indexed",)"
         R"("configuration":{"chunk_shape":[3,4]}}])"),
  };
  uint32_t seed = 1;
  for (const std::string& m : v3_cases) RandomRoundTrip(ZarrFormat::kV3, J(m), seed++);
  const char* v2[] = {
      R"({"shape":[],"dtype":"<i4"})",
      R"({"shape":[17],"dtype":"<i4","chunks":[5],"compressor":null})",
      R"({"shape":[7,6,5,4,3],"dtype":">i4","chunks":[3,4,2,4,2],"order":"F"})",
      R"({"shape":[9,10],"dtype":"<i4","chunks":[4,3],"order":"F","compressor":{"id":"zlib"},)"
      R"("dimension_separator":"/"})",
      R"({"shape":[9,10],"dtype":">i4","chunks":[4,3],"compressor":{"id":"zstd"},"fill_value":0})",
  };
  for (const char* m : v2) RandomRoundTrip(ZarrFormat::kV2, J(m), seed++);
}

TEST(ZarrArrayTest, ChunkKeysAndEdgePadding) {
  auto store = NewStore();
  auto a = ZarrArray::Create(store, "w/", ZarrFormat::kV3,
                             J(R"({"shape":[5],"data_type":"uint16","fill_value":9,)"
                               R"("chunk_grid":{"name":"regular","configuration":{"chunk_shape":[)"
                               R"(3]}}})"));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ((*a)->ChunkKey(std::vector<Index>{1}), "c/1");
  const uint16_t v[5] = {1, 2, 3, 4, 5};
  ASSERT_TRUE((*a)->Write(Box({0}, {5}), v).ok());
  // The edge chunk [3, 6) is stored at full size, padded with the fill value.
  EXPECT_EQ(Get(*store, "w/c/1"), std::string("\x04\x00\x05\x00\x09\x00", 6));
  EXPECT_EQ(Get(*store, "w/zarr.json").substr(0, 20), R"({"chunk_grid":{"conf)");

  auto b = ZarrArray::Create(store, "v/", ZarrFormat::kV2,
                             J(R"({"shape":[2,3],"dtype":"<u2","chunks":[2,2],"order":"F",)"
                               R"("compressor":null,"fill_value":7})"));
  ASSERT_TRUE(b.ok());
  const uint16_t w[6] = {1, 2, 3, 4, 5, 6};  // [[1,2,3],[4,5,6]]
  ASSERT_TRUE((*b)->Write(Box({0, 0}, {2, 3}), w).ok());
  // F order within each chunk; the edge chunk padded with 7.
  EXPECT_EQ(Get(*store, "v/0.0"), std::string("\x01\0\x04\0\x02\0\x05\0", 8));
  EXPECT_EQ(Get(*store, "v/0.1"), std::string("\x03\0\x06\0\x07\0\x07\0", 8));
}

TEST(ZarrArrayTest, FillChunksDeletedUnlessAskedToStore) {
  for (bool store_fill : {false, true}) {
    auto store = NewStore();
    CreateOptions options;
    options.store_data_equal_to_fill_value = store_fill;
    auto a = ZarrArray::Create(store, "", ZarrFormat::kV3,
                               J(R"({"shape":[4],"data_type":"float32","fill_value":"NaN",)"
                                 R"("chunk_grid":{"name":"regular","configuration":{"chunk_shape")"
                                 R"(:[2]}}})"),
                               options);
    ASSERT_TRUE(a.ok());
    const float nan = std::nanf("");
    const float v[4] = {nan, nan, 1.0f, nan};
    ASSERT_TRUE((*a)->Write(Box({0}, {4}), v).ok());
    EXPECT_EQ(Get(*store, "c/0") == "<missing>", !store_fill);
    EXPECT_NE(Get(*store, "c/1"), "<missing>");
    // Overwriting the data chunk with fill deletes it (unless storing fill).
    ASSERT_TRUE((*a)->Write(Box({2}, {1}), &nan).ok());
    EXPECT_EQ(Get(*store, "c/1") == "<missing>", !store_fill);
    float got[4] = {0, 0, 0, 0};
    ASSERT_TRUE((*a)->Read(Box({0}, {4}), got).ok());
    for (float g : got) EXPECT_TRUE(std::isnan(g));
  }
  // v2 with a null fill value stores every chunk, as TensorStore does.
  auto store = NewStore();
  auto b = ZarrArray::Create(store, "", ZarrFormat::kV2,
                             J(R"({"shape":[2],"dtype":"<f4","chunks":[2],"compressor":null})"));
  ASSERT_TRUE(b.ok());
  const float zeros[2] = {0, 0};
  ASSERT_TRUE((*b)->Write(Box({0}, {2}), zeros).ok());
  EXPECT_EQ(Get(*store, "0"), std::string(8, '\0'));
}

TEST(ZarrArrayTest, MissingChunksReadAsFill) {
  auto store = NewStore();
  auto a = ZarrArray::Create(store, "", ZarrFormat::kV3,
                             J(R"({"shape":[3,3],"data_type":"float64","fill_value":-1.5})"));
  ASSERT_TRUE(a.ok());
  double got[9];
  ASSERT_TRUE((*a)->Read(Box({0, 0}, {3, 3}), got).ok());
  for (double g : got) EXPECT_EQ(g, -1.5);
  EXPECT_TRUE(store->List("").value().size() == 1);  // only zarr.json
}

TEST(ZarrArrayTest, StridedSourceAndDestination) {
  auto store = NewStore();
  auto a = ZarrArray::Create(store, "", ZarrFormat::kV3,
                             J(R"({"shape":[4,6],"data_type":"int32",)"
                               R"("chunk_grid":{"name":"regular","configuration":{"chunk_shape":[)"
                               R"(2,4]}}})"));
  ASSERT_TRUE(a.ok());
  // Source: a column-major 4x6 buffer (a numpy F-order array / transpose view).
  int32_t f[24];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) f[j * 4 + i] = i * 10 + j;
  StridedLayout f_layout{{4, 16}};
  ASSERT_TRUE((*a)->Write(Box({0, 0}, {4, 6}), f, f_layout).ok());
  int32_t c[24];
  ASSERT_TRUE((*a)->Read(Box({0, 0}, {4, 6}), c).ok());
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j) EXPECT_EQ(c[i * 6 + j], i * 10 + j);
  // Destination: every other element of a wider buffer.
  int32_t wide[2 * 3 * 2];
  std::fill(std::begin(wide), std::end(wide), -7);
  ASSERT_TRUE((*a)->Read(Box({1, 2}, {2, 3}), wide, StridedLayout{{24, 8}}).ok());
  EXPECT_EQ(wide[0], 12);
  EXPECT_EQ(wide[1], -7);
  EXPECT_EQ(wide[2], 13);
  EXPECT_EQ(wide[6], 22);
  EXPECT_EQ(wide[10], 24);
}

// Shards written exactly as TensorStore 0.1.86 wrote them for
//   ts.open({"driver":"zarr3","kvstore":...,"metadata":{"shape":[5,5],
//     "data_type":"int16","chunk_grid":{..."chunk_shape":[4,4]},"codecs":
//     [{"name":"sharding_indexed","configuration":{"chunk_shape":[2,2]
//     (,"index_location":"start")}}]}}, create=True)
//   t[0:1,0:1] = 1; t[4,4] = 7
std::string Hex(const std::string& s) {
  static const char* d = "0123456789abcdef";
  std::string h;
  for (unsigned char c : s) h += std::string{d[c >> 4], d[c & 15]};
  return h;
}

TEST(ZarrArrayTest, ShardBytesMatchTensorStore) {
  const std::string ff(96, 'f');
  for (const char* location : {"end", "start"}) {
    auto store = NewStore();
    auto a = ZarrArray::Create(
        store, "", ZarrFormat::kV3,
        J(std::string(R"({"shape":[5,5],"data_type":"int16","chunk_grid":{"name":"regular",)"
                      R"("configuration":{"chunk_shape":[4,4]}},"codecs":[{"name":)"
                      R"("sharding_indexed","configuration":{"chunk_shape":[2,2],)"
                      R"("index_location":")") +
          location + R"("}}]})"));
    ASSERT_TRUE(a.ok()) << a.status().ToString();
    const int16_t one = 1, seven = 7;
    ASSERT_TRUE((*a)->Write(Box({0, 0}, {1, 1}), &one).ok());
    ASSERT_TRUE((*a)->Write(Box({4, 4}, {1, 1}), &seven).ok());
    if (std::string(location) == "end") {
      EXPECT_EQ(Hex(Get(*store, "c/0/0")),
                "01000000000000000000000000000000" "0800000000000000" + ff + "60d4c8ed");
      EXPECT_EQ(Hex(Get(*store, "c/1/1")),
                "07000000000000000000000000000000" "0800000000000000" + ff + "60d4c8ed");
    } else {
      EXPECT_EQ(Hex(Get(*store, "c/0/0")),
                "44000000000000000800000000000000" + ff + "b4ab5d58" "0100000000000000");
      EXPECT_EQ(Hex(Get(*store, "c/1/1")),
                "44000000000000000800000000000000" + ff + "b4ab5d58" "0700000000000000");
    }
    EXPECT_EQ(Get(*store, "c/0/1"), "<missing>");
  }
}

TEST(ZarrArrayTest, PartialShardReadFetchesIndexAndNeededInnerChunks) {
  auto recording = std::make_shared<RecordingKvStore>(NewStore());
  auto a = ZarrArray::Create(
      recording, "", ZarrFormat::kV3,
      J(R"({"shape":[8,8],"data_type":"int32","chunk_grid":{"name":"regular",)"
        R"("configuration":{"chunk_shape":[8,8]}},"codecs":[{"name":"sharding_indexed",)"
        R"("configuration":{"chunk_shape":[4,4],"codecs":[{"name":"zstd"}]}}]})"));
  ASSERT_TRUE(a.ok());
  std::vector<int32_t> v(64);
  for (int i = 0; i < 64; ++i) v[i] = i + 1;
  ASSERT_TRUE((*a)->Write(Box({0, 0}, {8, 8}), v.data()).ok());
  recording->TakeGets();
  int32_t got[2 * 2];
  ASSERT_TRUE((*a)->Read(Box({5, 1}, {2, 2}), got).ok());
  EXPECT_EQ(got[0], 5 * 8 + 1 + 1);
  EXPECT_EQ(got[3], 6 * 8 + 2 + 1);
  const std::vector<std::string> gets = recording->TakeGets();
  ASSERT_EQ(gets.size(), 2u);
  EXPECT_EQ(gets[0], "c/0/0 " + ByteRange::Suffix(4 * 16 + 4).ToString());
  EXPECT_EQ(gets[1].substr(0, 6), "c/0/0 ");
  EXPECT_NE(gets[1], "c/0/0 " + ByteRange::All().ToString());
  // A read of the whole shard fetches it once.
  std::vector<int32_t> all(64);
  ASSERT_TRUE((*a)->Read(Box({0, 0}, {8, 8}), all.data()).ok());
  EXPECT_EQ(all, v);
  EXPECT_EQ(recording->TakeGets(),
            std::vector<std::string>{"c/0/0 " + ByteRange::All().ToString()});
}

// Every error below is a clean Status naming the key.
void ExpectErrorNamingKey(const Status& s, StatusCode code, const std::string& key) {
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find("`" + key + "`"), std::string_view::npos) << s.ToString();
}

TEST(ZarrArrayTest, CorruptChunksAreDataLoss) {
  auto store = NewStore();
  auto a = ZarrArray::Create(store, "p/", ZarrFormat::kV3,
                             J(R"({"shape":[4],"data_type":"int32","chunk_grid":{"name":"regular",)"
                               R"("configuration":{"chunk_shape":[2]}}})"));
  ASSERT_TRUE(a.ok());
  int32_t buf[4] = {1, 2, 3, 4};
  ASSERT_TRUE((*a)->Write(Box({0}, {4}), buf).ok());
  ASSERT_TRUE(store->Put("p/c/1", AsBytes(std::string(5, 'x'))).ok());  // truncated
  ExpectErrorNamingKey((*a)->Read(Box({0}, {4}), buf), StatusCode::kDataLoss, "p/c/1");
  ExpectErrorNamingKey((*a)->Read(Box({3}, {1}), buf), StatusCode::kDataLoss, "p/c/1");
  // A partial write reads the corrupt chunk first and fails the same way.
  ExpectErrorNamingKey((*a)->Write(Box({3}, {1}), buf), StatusCode::kDataLoss, "p/c/1");

  auto c = ZarrArray::Create(store, "q/", ZarrFormat::kV3,
                             J(R"({"shape":[4],"data_type":"int32","codecs":["crc32c"]})"));
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE((*c)->Write(Box({0}, {4}), buf).ok());
  std::string bytes = Get(*store, "q/c/0");
  bytes[bytes.size() - 1] ^= 1;
  ASSERT_TRUE(store->Put("q/c/0", AsBytes(bytes)).ok());
  ExpectErrorNamingKey((*c)->Read(Box({0}, {4}), buf), StatusCode::kDataLoss, "q/c/0");
}

TEST(ZarrArrayTest, CorruptShardsAreDataLoss) {
  auto store = NewStore();
  auto a = ZarrArray::Create(
      store, "s/", ZarrFormat::kV3,
      J(R"({"shape":[4],"data_type":"uint8","chunk_grid":{"name":"regular",)"
        R"("configuration":{"chunk_shape":[4]}},"codecs":[{"name":"sharding_indexed",)"
        R"("configuration":{"chunk_shape":[2]}}]})"));
  ASSERT_TRUE(a.ok());
  const uint8_t v[4] = {1, 2, 3, 4};
  ASSERT_TRUE((*a)->Write(Box({0}, {4}), v).ok());
  const std::string good = Get(*store, "s/c/0");
  ASSERT_EQ(good.size(), 4u + 2 * 16 + 4);
  uint8_t got[4];
  // An index entry pointing past the end (index CRC recomputed so only the
  // entry is wrong).
  std::string bad = good;
  const uint64_t far = 1000;
  std::memcpy(&bad[4 + 16], &far, 8);
  const uint32_t crc = Crc32c(AsBytes(std::string_view(bad).substr(4, 32)));
  std::memcpy(&bad[4 + 32], &crc, 4);
  ASSERT_TRUE(store->Put("s/c/0", AsBytes(bad)).ok());
  ExpectErrorNamingKey((*a)->Read(Box({2}, {2}), got), StatusCode::kDataLoss, "s/c/0");
  ExpectErrorNamingKey((*a)->Read(Box({0}, {4}), got), StatusCode::kDataLoss, "s/c/0");
  // A shard shorter than its index.
  ASSERT_TRUE(store->Put("s/c/0", AsBytes(good.substr(0, 10))).ok());
  ExpectErrorNamingKey((*a)->Read(Box({2}, {1}), got), StatusCode::kDataLoss, "s/c/0");
  ExpectErrorNamingKey((*a)->Read(Box({0}, {4}), got), StatusCode::kDataLoss, "s/c/0");
  // A bad index checksum.
  bad = good;
  bad[bad.size() - 1] ^= 0x40;
  ASSERT_TRUE(store->Put("s/c/0", AsBytes(bad)).ok());
  ExpectErrorNamingKey((*a)->Read(Box({2}, {1}), got), StatusCode::kDataLoss, "s/c/0");
}

TEST(ZarrArrayTest, OpenAndCreateErrors) {
  auto store = NewStore();
  auto missing = ZarrArray::Open(store, "x/");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  // Stored metadata with an unknown codec / a fill value of the wrong type.
  ASSERT_TRUE(store->Put("bad/zarr.json",
                         AsBytes(R"({"chunk_grid":{"configuration":{"chunk_shape":[4]},)"
                                 R"("name":"regular"},"chunk_key_encoding":{"name":"default"},)"
                                 R"("codecs":[{"configuration":{"endian":"little"},)"
                                 R"("name":"bytes"},{"name":"lzma"}],"data_type":"int32",)"
                                 R"("fill_value":0,"node_type":"array","shape":[4],)"
                                 R"("zarr_format":3})"))
                  .ok());
  auto bad = ZarrArray::Open(store, "bad/");
  ExpectErrorNamingKey(bad.status(), StatusCode::kInvalidArgument, "bad/zarr.json");
  ASSERT_TRUE(store->Put("bad2/.zarray",
                         AsBytes(R"({"chunks":[4],"compressor":null,"dtype":"<i4",)"
                                 R"("fill_value":"x","filters":null,"order":"C",)"
                                 R"("shape":[4],"zarr_format":2})"))
                  .ok());
  ExpectErrorNamingKey(ZarrArray::Open(store, "bad2/").status(), StatusCode::kInvalidArgument,
                       "bad2/.zarray");
  ASSERT_TRUE(store->Put("bad3/zarr.json", AsBytes("{not json")).ok());
  ExpectErrorNamingKey(ZarrArray::Open(store, "bad3/").status(), StatusCode::kInvalidArgument,
                       "bad3/zarr.json");
  // Format detection falls back to v2.
  ASSERT_TRUE(ZarrArray::Create(store, "v2/", ZarrFormat::kV2, J(
      R"({"shape":[3],"dtype":"|u1"})")).ok());
  auto v2 = ZarrArray::Open(store, "v2/");
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ((*v2)->metadata().format, ZarrFormat::kV2);
  // Create refuses to replace an array unless asked.
  auto again = ZarrArray::Create(store, "v2/", ZarrFormat::kV2, J(
      R"({"shape":[3],"dtype":"|u1"})"));
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  CreateOptions overwrite;
  overwrite.overwrite = true;
  EXPECT_TRUE(ZarrArray::Create(store, "v2/", ZarrFormat::kV2, J(R"({"shape":[5],"dtype":"|u1"})"),
                                overwrite)
                  .ok());
  // Boxes outside the domain and bad layouts.
  uint8_t buf[8];
  EXPECT_EQ((*v2)->Read(Box({1}, {3}), buf).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*v2)->Write(Box({-1}, {1}), buf).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*v2)->Read(Box({0, 0}, {1, 1}), buf).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ((*v2)->Read(Box({0}, {1}), buf, StridedLayout{{1, 1}}).code(),
            StatusCode::kInvalidArgument);
  // Partial metadata that TensorStore would reject.
  EXPECT_EQ(ZarrArray::Create(store, "e/", ZarrFormat::kV3,
                              J(R"({"shape":[10],"data_type":"int32","chunk_grid":)"
                                R"({"name":"regular","configuration":{"chunk_shape":[4]}},)"
                                R"("codecs":[{"name":"sharding_indexed",)"
                                R"("configuration":{"chunk_shape":[3]}}]})"))
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ZarrArray::Open(store, "noslash").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cairn
