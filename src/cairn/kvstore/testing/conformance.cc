#include "cairn/kvstore/testing/conformance.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

namespace cairn {
namespace {

// "t<t>/k<i>" (built with += : GCC 12 warns falsely on "lit" + std::string).
std::string ThreadKey(int t, int i) {
  std::string key = "t";
  key += std::to_string(t);
  key += "/k";
  key += std::to_string(i);
  return key;
}

std::string Str(const std::optional<Buffer>& b) { return b ? b->ToString() : "<missing>"; }

// Reads `key`, failing the test on error; "<missing>" for an absent key.
std::string GetStr(KvStore& s, std::string_view key, const ByteRange& range = {}) {
  auto r = s.Get(key, range);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  if (!r.ok()) return "<error>";
  return Str(*r);
}

void ExpectInvalid(const Status& s, std::string_view what) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << what << ": " << s.ToString();
}

void GetMissing(KvStore& s) {
  EXPECT_EQ(GetStr(s, "missing"), "<missing>");
  EXPECT_EQ(GetStr(s, "no/such/dir/key"), "<missing>");
  EXPECT_EQ(GetStr(s, "missing", ByteRange::Range(0, 1)), "<missing>");
}

void PutGet(KvStore& s) {
  ASSERT_TRUE(s.Put("a", AsBytes("alpha")).ok());
  ASSERT_TRUE(s.Put("dir/sub/b", AsBytes("beta")).ok());
  ASSERT_TRUE(s.Put(".zarray", AsBytes("{}")).ok());
  EXPECT_EQ(GetStr(s, "a"), "alpha");
  EXPECT_EQ(GetStr(s, "dir/sub/b"), "beta");
  EXPECT_EQ(GetStr(s, ".zarray"), "{}");
  EXPECT_EQ(GetStr(s, "dir/sub"), "<missing>");  // a directory is not a key
  EXPECT_EQ(GetStr(s, "dir"), "<missing>");
  std::string binary("\x00\xff\x01\x80", 4);
  ASSERT_TRUE(s.Put("bin", AsBytes(binary)).ok());
  EXPECT_EQ(GetStr(s, "bin"), binary);
}

void GetIntoWholeValue(KvStore& s) {
  ASSERT_TRUE(s.Put("dir/v", AsBytes("value")).ok());
  std::string dst(5, '?');
  MutableByteView view(reinterpret_cast<uint8_t*>(dst.data()), dst.size());
  auto got = s.GetInto("dir/v", view);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_TRUE(*got);
  EXPECT_EQ(dst, "value");
  auto missing = s.GetInto("dir/none", view);
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  EXPECT_FALSE(*missing);
  std::string small(4, '?');
  auto wrong = s.GetInto("dir/v", MutableByteView(reinterpret_cast<uint8_t*>(small.data()), 4));
  EXPECT_EQ(wrong.status().code(), StatusCode::kDataLoss) << wrong.status().ToString();
  EXPECT_NE(wrong.status().message().find("dir/v"), std::string_view::npos);
  ExpectInvalid(s.GetInto("../x", view).status(), "GetInto ../x");
}

// GetMany delivers every read exactly once with the bytes Get returns.
void GetManyMatchesGet(KvStore& s) {
  const Buffer big = TestBytes(300000, 7);
  ASSERT_TRUE(s.Put("m/big", big).ok());
  ASSERT_TRUE(s.Put("m/small", AsBytes("small value")).ok());
  ASSERT_TRUE(s.Put("m/empty", ByteView()).ok());
  ASSERT_TRUE(s.Put("other", AsBytes("x")).ok());
  std::vector<KeyRead> reads = {
      {"m/big", ByteRange::All()},         {"m/small", ByteRange::Range(2, 5)},
      {"missing/key", ByteRange::All()},   {"m/big", ByteRange::Suffix(1000)},
      {"m/empty", ByteRange::All()},       {"m/big", ByteRange::Range(123, 70000)},
      {"other", ByteRange::All()},         {"m/small", ByteRange::From(6)},
  };
  std::mutex mu;
  std::vector<int> calls(reads.size(), 0);
  std::vector<std::string> got(reads.size());
  Status st = s.GetMany(reads, [&](size_t i, std::optional<ByteView> v) {
    std::lock_guard<std::mutex> lock(mu);
    ++calls.at(i);
    got[i] = v ? std::string(AsStringView(*v)) : "<missing>";
    return Status::OK();
  });
  ASSERT_TRUE(st.ok()) << st.ToString();
  for (size_t i = 0; i < reads.size(); ++i) {
    EXPECT_EQ(calls[i], 1) << i;
    EXPECT_EQ(got[i], GetStr(s, reads[i].key, reads[i].range)) << i;
  }
  EXPECT_EQ(got[2], "<missing>");
  EXPECT_EQ(got[1], "all v");
  EXPECT_EQ(got[3].size(), 1000u);
  // Nothing to read: no calls, OK.
  EXPECT_TRUE(s.GetMany({}, [](size_t, std::optional<ByteView>) {
                 return InternalError("called for an empty batch");
               }).ok());
  // A range outside its value and a bad key fail the batch; so does the
  // callback's own error, which comes back as it was.
  auto ignore = [](size_t, std::optional<ByteView>) { return Status::OK(); };
  ExpectInvalid(s.GetMany({{"m/small", ByteRange::Range(5, 100)}}, ignore), "GetMany range");
  ExpectInvalid(s.GetMany({{"../x", ByteRange::All()}}, ignore), "GetMany ../x");
  Status stop = s.GetMany(reads, [](size_t i, std::optional<ByteView>) {
    return i == 0 ? DataLossError("stop at read 0") : Status::OK();
  });
  EXPECT_EQ(stop.code(), StatusCode::kDataLoss) << stop.ToString();
  EXPECT_NE(stop.message().find("stop at read 0"), std::string_view::npos) << stop.ToString();
}

void Overwrite(KvStore& s) {
  ASSERT_TRUE(s.Put("k", AsBytes("a much longer first value")).ok());
  ASSERT_TRUE(s.Put("k", AsBytes("short")).ok());
  EXPECT_EQ(GetStr(s, "k"), "short");
  auto list = s.List("");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0], (KeyInfo{"k", 5}));
}

void EmptyValue(KvStore& s) {
  ASSERT_TRUE(s.Put("empty", ByteView()).ok());
  auto r = s.Get("empty");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->has_value());
  EXPECT_EQ((*r)->size(), 0u);
  EXPECT_EQ(GetStr(s, "empty", ByteRange::Suffix(0)), "");
  EXPECT_EQ(GetStr(s, "empty", ByteRange::Range(0, 0)), "");
  auto list = s.List("");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0], (KeyInfo{"empty", 0}));
}

void ByteRanges(KvStore& s) {
  ASSERT_TRUE(s.Put("r", AsBytes("0123456789")).ok());
  EXPECT_EQ(GetStr(s, "r", ByteRange::Range(2, 3)), "234");
  EXPECT_EQ(GetStr(s, "r", ByteRange::Range(0, 10)), "0123456789");
  EXPECT_EQ(GetStr(s, "r", ByteRange::Range(10, 0)), "");
  EXPECT_EQ(GetStr(s, "r", ByteRange::From(7)), "789");
  EXPECT_EQ(GetStr(s, "r", ByteRange::From(10)), "");
  EXPECT_EQ(GetStr(s, "r", ByteRange::Suffix(4)), "6789");
  EXPECT_EQ(GetStr(s, "r", ByteRange::Suffix(10)), "0123456789");
  EXPECT_EQ(GetStr(s, "r", ByteRange::Suffix(0)), "");
  for (const ByteRange& bad : {ByteRange::Range(8, 3), ByteRange::From(11), ByteRange::Suffix(11),
                               ByteRange::Range(11, 0), ByteRange::Range(1, ~uint64_t{0})}) {
    auto r = s.Get("r", bad);
    EXPECT_FALSE(r.ok()) << bad.ToString();
    if (!r.ok()) ExpectInvalid(r.status(), bad.ToString());
  }
}

void PutIfAbsent(KvStore& s) {
  auto first = s.PutIfAbsent("once", AsBytes("first"));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_TRUE(*first);
  auto second = s.PutIfAbsent("once", AsBytes("second"));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_FALSE(*second);
  EXPECT_EQ(GetStr(s, "once"), "first");
  auto nested = s.PutIfAbsent("new/dir/once", AsBytes("n"));
  ASSERT_TRUE(nested.ok()) << nested.status().ToString();
  EXPECT_TRUE(*nested);
  EXPECT_EQ(GetStr(s, "new/dir/once"), "n");
  // Racing PutIfAbsent calls: exactly one wins.
  std::atomic<int> wins{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::string value = "v";
      value += std::to_string(t);
      auto r = s.PutIfAbsent("race", AsBytes(value));
      EXPECT_TRUE(r.ok());
      if (r.ok() && *r) ++wins;
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(wins.load(), 1);
  EXPECT_EQ(GetStr(s, "race").substr(0, 1), "v");
}

void CompareAndPut(KvStore& s) {
  auto cas = [&](std::string_view key, std::optional<std::string_view> expected,
                 std::string_view value) -> bool {
    std::optional<ByteView> e;
    if (expected) e = AsBytes(*expected);
    auto r = s.CompareAndPut(key, e, AsBytes(value));
    EXPECT_TRUE(r.ok()) << "CompareAndPut " << key << ": " << r.status().ToString();
    return r.ok() && *r;
  };
  // Absent key: only "expect absent" stores.
  EXPECT_FALSE(cas("cas", std::string_view("a"), "x"));
  EXPECT_FALSE(s.Get("cas")->has_value());
  EXPECT_TRUE(cas("cas", std::nullopt, "a"));
  EXPECT_EQ(GetStr(s, "cas"), "a");
  // Present key: "expect absent" and a wrong value fail and keep the value.
  EXPECT_FALSE(cas("cas", std::nullopt, "b"));
  EXPECT_FALSE(cas("cas", std::string_view("x"), "b"));
  EXPECT_FALSE(cas("cas", std::string_view("aa"), "b"));
  EXPECT_FALSE(cas("cas", std::string_view(""), "b"));
  EXPECT_EQ(GetStr(s, "cas"), "a");
  EXPECT_TRUE(cas("cas", std::string_view("a"), "b"));
  EXPECT_EQ(GetStr(s, "cas"), "b");
  // Empty values, and a key in new directories.
  EXPECT_TRUE(cas("empty", std::nullopt, ""));
  EXPECT_TRUE(cas("empty", std::string_view(""), "z"));
  EXPECT_EQ(GetStr(s, "empty"), "z");
  EXPECT_TRUE(cas("new/dir/cas", std::nullopt, "n"));
  EXPECT_EQ(GetStr(s, "new/dir/cas"), "n");
  ExpectInvalid(s.CompareAndPut("a/../b", std::nullopt, AsBytes("x")).status(),
                "CompareAndPut of a/../b");
  // Racing read-increment-CompareAndPut loops lose no increment.
  constexpr int kThreads = 4;
  constexpr int kIncrements = 10;
  ASSERT_TRUE(s.Put("counter", AsBytes("0")).ok());
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < kIncrements;) {
        auto cur = s.Get("counter");
        ASSERT_TRUE(cur.ok() && cur->has_value());
        std::string old = (*cur)->ToString();
        std::string next = std::to_string(std::stoi(old) + 1);
        auto r = s.CompareAndPut("counter", AsBytes(old), AsBytes(next));
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        if (*r) ++i;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(GetStr(s, "counter"), std::to_string(kThreads * kIncrements));
  // Nothing but the keys written is listed (no lock or temporary files).
  auto list = s.List("");
  ASSERT_TRUE(list.ok());
  std::vector<std::string> keys;
  for (const auto& k : *list) keys.push_back(k.key);
  EXPECT_EQ(keys, (std::vector<std::string>{"cas", "counter", "empty", "new/dir/cas"}));
}

void DeleteMissing(KvStore& s) {
  EXPECT_TRUE(s.Delete("never").ok());
  EXPECT_TRUE(s.Delete("no/such/dir").ok());
  ASSERT_TRUE(s.Put("d/x", AsBytes("1")).ok());
  EXPECT_TRUE(s.Delete("d").ok());  // a directory, not a key
  EXPECT_EQ(GetStr(s, "d/x"), "1");
  EXPECT_TRUE(s.Delete("d/x").ok());
  EXPECT_EQ(GetStr(s, "d/x"), "<missing>");
  EXPECT_TRUE(s.Delete("d/x").ok());
}

void ListPrefixSortedWithSizes(KvStore& s) {
  const std::vector<std::pair<std::string, std::string>> kv = {
      {"b", "22"}, {"a/c/d", "4444"}, {"a/b", "1"}, {"ab", "333"}, {"a/c/e", ""},
      {"a.b", "55555"}, {"z/\xc3\xa9", "6"}, {"a/b0", "77"}};
  for (const auto& [k, v] : kv) ASSERT_TRUE(s.Put(k, AsBytes(v)).ok()) << k;
  auto all = s.List("");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  std::vector<KeyInfo> want = {{"a.b", 5}, {"a/b", 1}, {"a/b0", 2}, {"a/c/d", 4},
                               {"a/c/e", 0}, {"ab", 3}, {"b", 2}, {"z/\xc3\xa9", 1}};
  EXPECT_EQ(*all, want);
  auto a = s.List("a/");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, (std::vector<KeyInfo>{{"a/b", 1}, {"a/b0", 2}, {"a/c/d", 4}, {"a/c/e", 0}}));
  auto partial = s.List("a/b");
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(*partial, (std::vector<KeyInfo>{{"a/b", 1}, {"a/b0", 2}}));
  auto ab = s.List("a");
  ASSERT_TRUE(ab.ok());
  EXPECT_EQ(ab->size(), 6u);
  auto deep = s.List("a/c/");
  ASSERT_TRUE(deep.ok());
  EXPECT_EQ(*deep, (std::vector<KeyInfo>{{"a/c/d", 4}, {"a/c/e", 0}}));
  for (const char* none : {"q", "a/c/d/", "a/x/", "../", "/a"}) {
    auto r = s.List(none);
    ASSERT_TRUE(r.ok()) << none << r.status().ToString();
    EXPECT_TRUE(r->empty()) << none;
  }
}

void InvalidKeys(KvStore& s) {
  const std::string nul("a\0b", 3);
  for (std::string_view key : {std::string_view(".."), std::string_view("/abs"),
                               std::string_view("a/../b"), std::string_view(nul),
                               std::string_view(""), std::string_view("."),
                               std::string_view("a/./b"), std::string_view("a/..")}) {
    std::string what = "key `" + std::string(key) + "`";
    ExpectInvalid(s.Put(key, AsBytes("x")), what + " Put");
    ExpectInvalid(s.Get(key).status(), what + " Get");
    ExpectInvalid(s.PutIfAbsent(key, AsBytes("x")).status(), what + " PutIfAbsent");
    ExpectInvalid(s.Delete(key), what + " Delete");
  }
  auto list = s.List("");
  ASSERT_TRUE(list.ok());
  EXPECT_TRUE(list->empty());
}

void ConcurrentPuts(KvStore& s) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 10;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        std::string key = ThreadKey(t, i);
        Buffer value = TestBytes(100 + t * 7 + i, t * 1000 + i);
        EXPECT_TRUE(s.Put(key, value).ok());
        EXPECT_TRUE(s.Put("shared", value).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  auto list = s.List("");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(list->size(), size_t{kThreads * kPerThread + 1});
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      auto r = s.Get(ThreadKey(t, i));
      ASSERT_TRUE(r.ok() && r->has_value());
      EXPECT_TRUE(**r == TestBytes(100 + t * 7 + i, t * 1000 + i));
    }
  }
  // "shared" holds one of the values written, whole.
  auto shared = s.Get("shared");
  ASSERT_TRUE(shared.ok() && shared->has_value());
  bool matched = false;
  for (int t = 0; t < kThreads && !matched; ++t) {
    for (int i = 0; i < kPerThread && !matched; ++i) {
      matched = **shared == TestBytes(100 + t * 7 + i, t * 1000 + i);
    }
  }
  EXPECT_TRUE(matched);
}

void ApplyBatch(KvStore& s) {
  ASSERT_TRUE(s.Put("gone", AsBytes("x")).ok());
  ASSERT_TRUE(s.Put("kept", AsBytes("old")).ok());
  std::vector<KvMutation> batch;
  batch.push_back({"kept", Buffer::CopyOf("new")});
  batch.push_back({"gone", std::nullopt});
  batch.push_back({"added/one", Buffer::CopyOf("1")});
  batch.push_back({"never", std::nullopt});
  ASSERT_TRUE(s.ApplyBatch(std::move(batch)).ok());
  auto list = s.List("");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (std::vector<KeyInfo>{{"added/one", 1}, {"kept", 3}}));
  EXPECT_EQ(GetStr(s, "kept"), "new");
  std::vector<KvMutation> bad;
  bad.push_back({"../escape", Buffer::CopyOf("x")});
  bad.push_back({"after", Buffer::CopyOf("y")});
  ExpectInvalid(s.ApplyBatch(std::move(bad)), "batch with a bad key");
  auto after = s.List("");
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(*after, *list) << "a batch failing at its first mutation changed the store";
}

void DeletePrefix(KvStore& s) {
  for (const char* k : {"p/a", "p/b/c", "pq", "q"}) ASSERT_TRUE(s.Put(k, AsBytes("v")).ok());
  ASSERT_TRUE(s.DeletePrefix("p/").ok());
  auto list = s.List("");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (std::vector<KeyInfo>{{"pq", 1}, {"q", 1}}));
}

void LargeValue(KvStore& s) {
  const size_t kSize = (20 << 20) + 123;  // 20 MiB plus an unaligned tail
  Buffer value = TestBytes(kSize, 42);
  ASSERT_TRUE(s.Put("big/value", value).ok());
  auto r = s.Get("big/value");
  ASSERT_TRUE(r.ok() && r->has_value()) << r.status().ToString();
  EXPECT_TRUE(**r == value);
  auto tail = s.Get("big/value", ByteRange::Suffix(5000));
  ASSERT_TRUE(tail.ok() && tail->has_value());
  EXPECT_TRUE(**tail == Buffer::CopyOf(value.view().subspan(kSize - 5000)));
  auto mid = s.Get("big/value", ByteRange::Range(4095, 8194));
  ASSERT_TRUE(mid.ok() && mid->has_value());
  EXPECT_TRUE(**mid == Buffer::CopyOf(value.view().subspan(4095, 8194)));
  auto list = s.List("big/");
  ASSERT_TRUE(list.ok());
  EXPECT_EQ(*list, (std::vector<KeyInfo>{{"big/value", kSize}}));
  // Overwrite with a smaller value, from an unaligned source.
  ASSERT_TRUE(s.Put("big/value", value.view().subspan(1, kSize / 2)).ok());
  auto r2 = s.Get("big/value");
  ASSERT_TRUE(r2.ok() && r2->has_value());
  EXPECT_TRUE(**r2 == Buffer::CopyOf(value.view().subspan(1, kSize / 2)));
}

std::vector<std::string> Keys(KvStore& s, std::string_view prefix) {
  auto list = s.List(prefix);
  EXPECT_TRUE(list.ok()) << list.status().ToString();
  std::vector<std::string> out;
  if (list.ok()) {
    for (const KeyInfo& k : *list) out.push_back(k.key);
  }
  return out;
}

void ListChildren(KvStore& s) {
  using K = ChildEntry::Kind;
  for (const char* k : {"a/b", "a/c/d", "a-c", "ab", "z"}) ASSERT_TRUE(s.Put(k, AsBytes("v")).ok());
  auto top = s.ListChildren("");
  ASSERT_TRUE(top.ok()) << top.status().ToString();
  EXPECT_EQ(*top, (std::vector<ChildEntry>{{"a", K::kPrefix}, {"a-c", K::kKey}, {"ab", K::kKey}, {"z", K::kKey}}));
  auto a = s.ListChildren("a/");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(*a, (std::vector<ChildEntry>{{"b", K::kKey}, {"c", K::kPrefix}}));
  auto missing = s.ListChildren("q/");
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  EXPECT_TRUE(missing->empty());
  for (const char* bad : {"a", "../", "/a/", "a/../"}) {
    auto r = s.ListChildren(bad);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad << ": " << r.status().ToString();
  }
}

// Begin / write / Finish: nothing visible under the final prefix before
// Finish (unless the store commits in place), everything after, and a
// second commit of the same prefix is AlreadyExists while another is fine.
void PrefixCommitPublishes(KvStore& s) {
  auto c = s.BeginPrefixCommit("ckpt/1/", "ckpt/1.tmp-a/");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->final_prefix, "ckpt/1/");
  ASSERT_TRUE(s.Put(c->pending_prefix + "data/x", AsBytes("xx")).ok());
  ASSERT_TRUE(s.Put(c->pending_prefix + "meta", AsBytes("m")).ok());
  if (!c->in_place) {
    EXPECT_EQ(c->pending_prefix, "ckpt/1.tmp-a/");
    EXPECT_TRUE(Keys(s, "ckpt/1/").empty());
  }
  Status done = s.FinishPrefixCommit(*c, "commit_success.txt", AsBytes("ok"));
  ASSERT_TRUE(done.ok()) << done.ToString();
  EXPECT_EQ(Keys(s, "ckpt/1/"),
            (std::vector<std::string>{"ckpt/1/commit_success.txt", "ckpt/1/data/x", "ckpt/1/meta"}));
  EXPECT_EQ(GetStr(s, "ckpt/1/commit_success.txt"), "ok");
  EXPECT_EQ(GetStr(s, "ckpt/1/data/x"), "xx");
  EXPECT_TRUE(Keys(s, "ckpt/1.tmp-a/").empty());
  auto again = s.BeginPrefixCommit("ckpt/1/", "ckpt/1.tmp-b/");
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists) << again.status().ToString();
  EXPECT_NE(again.status().message().find("ckpt/1/"), std::string_view::npos) << again.status().ToString();
  auto other = s.BeginPrefixCommit("ckpt/2/", "ckpt/2.tmp-b/");
  EXPECT_TRUE(other.ok()) << other.status().ToString();
  ExpectInvalid(s.BeginPrefixCommit("ckpt/3", "ckpt/3.tmp/").status(), "final prefix without '/'");
  ExpectInvalid(s.BeginPrefixCommit("", "x/").status(), "empty final prefix");
  ExpectInvalid(s.BeginPrefixCommit("../x/", "y/").status(), "final prefix with ..");
}

// A straggling writer of an older attempt (pending prefix p1, removed by the
// caller before a new attempt p2 began) never reaches the committed prefix,
// and the old attempt can no longer finish.
void PrefixCommitIgnoresStraggler(KvStore& s) {
  auto c1 = s.BeginPrefixCommit("run/7/", "run/7.tmp-1/");
  ASSERT_TRUE(c1.ok()) << c1.status().ToString();
  if (c1->in_place) GTEST_SKIP() << "in-place commits cannot exclude stragglers";
  ASSERT_TRUE(s.Put(c1->pending_prefix + "old", AsBytes("1")).ok());
  ASSERT_TRUE(s.DeletePrefix(c1->pending_prefix).ok());
  auto c2 = s.BeginPrefixCommit("run/7/", "run/7.tmp-2/");
  ASSERT_TRUE(c2.ok()) << c2.status().ToString();
  ASSERT_TRUE(s.Put(c2->pending_prefix + "new", AsBytes("2")).ok());
  ASSERT_TRUE(s.Put(c1->pending_prefix + "late", AsBytes("1")).ok());  // the straggler
  ASSERT_TRUE(s.FinishPrefixCommit(*c2, "done", AsBytes("")).ok());
  EXPECT_EQ(Keys(s, "run/7/"), (std::vector<std::string>{"run/7/done", "run/7/new"}));
  Status stale = s.FinishPrefixCommit(*c1, "done", AsBytes(""));
  EXPECT_TRUE(stale.code() == StatusCode::kAlreadyExists || stale.code() == StatusCode::kNotFound)
      << stale.ToString();
  EXPECT_EQ(Keys(s, "run/7/"), (std::vector<std::string>{"run/7/done", "run/7/new"}));
}

class ConformanceTest : public ::testing::Test {
 public:
  ConformanceTest(KvStoreFactory factory, void (*check)(KvStore&))
      : factory_(std::move(factory)), check_(check) {}
  void TestBody() override {
    std::shared_ptr<KvStore> store = factory_();
    ASSERT_NE(store, nullptr);
    auto list = store->List("");
    ASSERT_TRUE(list.ok()) << list.status().ToString();
    ASSERT_TRUE(list->empty()) << "the factory must make an empty store";
    check_(*store);
  }

 private:
  KvStoreFactory factory_;
  void (*check_)(KvStore&);
};

}  // namespace

Buffer TestBytes(size_t size, uint32_t seed) {
  Buffer b(size);
  uint64_t x = 0x9e3779b97f4a7c15ull * (seed + 1);
  for (size_t i = 0; i < size; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    b.data()[i] = static_cast<uint8_t>(x);
  }
  return b;
}

bool RegisterKvStoreConformanceTests(const std::string& suite, KvStoreFactory factory) {
  struct Check {
    const char* name;
    void (*fn)(KvStore&);
  };
  static const Check kChecks[] = {
      {"GetMissing", GetMissing},
      {"PutGet", PutGet},
      {"GetIntoWholeValue", GetIntoWholeValue},
      {"GetManyMatchesGet", GetManyMatchesGet},
      {"Overwrite", Overwrite},
      {"EmptyValue", EmptyValue},
      {"ByteRanges", ByteRanges},
      {"PutIfAbsent", PutIfAbsent},
      {"CompareAndPut", CompareAndPut},
      {"DeleteMissing", DeleteMissing},
      {"ListPrefixSortedWithSizes", ListPrefixSortedWithSizes},
      {"InvalidKeys", InvalidKeys},
      {"ConcurrentPuts", ConcurrentPuts},
      {"ApplyBatch", ApplyBatch},
      {"DeletePrefix", DeletePrefix},
      {"LargeValue", LargeValue},
      {"ListChildren", ListChildren},
      {"PrefixCommitPublishes", PrefixCommitPublishes},
      {"PrefixCommitIgnoresStraggler", PrefixCommitIgnoresStraggler},
  };
  for (const Check& c : kChecks) {
    void (*fn)(KvStore&) = c.fn;
    ::testing::RegisterTest(suite.c_str(), c.name, nullptr, nullptr, __FILE__, __LINE__,
                            [factory, fn]() -> ::testing::Test* {
                              return new ConformanceTest(factory, fn);
                            });
  }
  return true;
}

}  // namespace cairn
