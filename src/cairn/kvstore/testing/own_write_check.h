// A check shared by the object-store drivers' tests (s3, gcs): a
// compare-and-put expecting the bytes this store object wrote last with a
// conditional write (an OCDBT manifest commit after commit) costs one
// request, the write going out with the ETag / generation of its own earlier
// write, without reading the value first. Controls: another object on the
// same keys reads first (two requests); once that other object changed the
// value, the stale ETag / generation fails and the read decides (false, the
// value kept), and the right expectation then succeeds.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>

#include "cairn/kvstore/kvstore.h"

namespace cairn::testing {

// `a` and `b` are two store objects over the same empty keys; `calls`
// counts the requests they sent so far.
inline void ExpectCompareAndPutOfItsOwnWriteSkipsTheRead(KvStore& a, KvStore& b,
                                                         const std::function<uint64_t()>& calls) {
  auto value = [&](KvStore& s) {
    auto v = s.Get("manifest");
    return v.ok() && v->has_value() ? (*v)->ToString() : std::string("<none>");
  };
  auto put = [&](KvStore& s, const char* expected, const char* next) -> std::pair<bool, uint64_t> {
    const uint64_t before = calls();
    auto r = s.CompareAndPut("manifest", AsBytes(expected), AsBytes(next));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return {r.ok() && *r, calls() - before};
  };
  auto created = a.PutIfAbsent("manifest", AsBytes("v1"));
  ASSERT_TRUE(created.ok() && *created) << created.status().ToString();
  EXPECT_EQ(put(a, "v1", "v2"), std::make_pair(true, uint64_t{1}));
  EXPECT_EQ(put(a, "v2", "v3"), std::make_pair(true, uint64_t{1}));
  EXPECT_EQ(value(a), "v3");
  EXPECT_EQ(put(b, "v3", "v4"), std::make_pair(true, uint64_t{2}));  // control
  EXPECT_EQ(put(a, "v3", "v5").first, false);  // a's ETag / generation is stale
  EXPECT_EQ(value(a), "v4");
  EXPECT_EQ(put(a, "v4", "v6").first, true);
  EXPECT_EQ(value(b), "v6");
}

}  // namespace cairn::testing
