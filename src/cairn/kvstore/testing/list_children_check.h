// A check shared by the object-store drivers' tests (s3, gcs): ListChildren
// is one listing with delimiter '/', so a checkpoint root holding a few steps
// of many keys each is listed in a page per `page_size` children, not per
// `page_size` keys below them (before, ListChildren listed every key below
// the prefix: step discovery read every object name of every step). The
// entries equal those the default ListChildren derives from List, across
// pages, with a name that is both a key and a prefix and a name ("a-c") that
// sorts between a prefix's keys.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cairn/kvstore/kvstore.h"

namespace cairn::testing {

// `s` is an empty store whose listing pages hold `page_size` entries (5 or
// so); `calls` counts the requests it sent so far.
inline void ExpectListChildrenIsOneDelimitedListing(KvStore& s, int page_size,
                                                     const std::function<uint64_t()>& calls) {
  using K = ChildEntry::Kind;
  std::vector<KvMutation> puts;
  auto put = [&](std::string key) { puts.push_back(KvMutation{std::move(key), Buffer::CopyOf(AsBytes("v"))}); };
  for (const char* step : {"1", "2", "10"}) {
    for (int k = 0; k < 3 * page_size; ++k) put(std::string("root/") + step + "/state/k" + std::to_string(k));
    put(std::string("root/") + step + "/commit_success.txt");
  }
  put("root/1");  // both a key and a prefix
  put("root/1-a");  // sorts between root/1 and root/1/...
  put("root/metadata");
  ASSERT_TRUE(s.ApplyBatch(std::move(puts)).ok());

  uint64_t before = calls();
  auto all = s.List("root/");
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  const uint64_t list_pages = calls() - before;
  ASSERT_GE(list_pages, 9u);  // control: 51 keys in pages of `page_size`

  before = calls();
  auto children = s.ListChildren("root/");
  const uint64_t children_pages = calls() - before;
  ASSERT_TRUE(children.ok()) << children.status().ToString();
  const std::vector<ChildEntry> expected = {{"1", K::kKey},        {"1", K::kPrefix}, {"1-a", K::kKey},
                                            {"10", K::kPrefix},    {"2", K::kPrefix}, {"metadata", K::kKey}};
  EXPECT_EQ(*children, expected);
  auto derived = s.KvStore::ListChildren("root/");  // the default, from List
  ASSERT_TRUE(derived.ok()) << derived.status().ToString();
  EXPECT_EQ(*children, *derived);
  // 6 entries: 2 pages of 5 (or 1 where the server fills a page further).
  EXPECT_LE(children_pages, 2u) << "ListChildren listed the keys below the children";

  // One level down, across pages, with a child holding keys.
  before = calls();
  auto step = s.ListChildren("root/1/");
  ASSERT_TRUE(step.ok()) << step.status().ToString();
  EXPECT_EQ(*step, (std::vector<ChildEntry>{{"commit_success.txt", K::kKey}, {"state", K::kPrefix}}));
  EXPECT_LE(calls() - before, 1u);
  auto keys = s.ListChildren("root/1/state/");
  ASSERT_TRUE(keys.ok()) << keys.status().ToString();
  auto keys_derived = s.KvStore::ListChildren("root/1/state/");
  ASSERT_TRUE(keys_derived.ok());
  EXPECT_EQ(keys->size(), static_cast<size_t>(3 * page_size));
  EXPECT_EQ(*keys, *keys_derived);
  auto missing = s.ListChildren("nothing/");
  ASSERT_TRUE(missing.ok()) << missing.status().ToString();
  EXPECT_TRUE(missing->empty());
  EXPECT_EQ(s.ListChildren("root").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace cairn::testing
