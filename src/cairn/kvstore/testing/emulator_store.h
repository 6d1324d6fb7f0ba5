// Stores on the test emulators (emulator_server.h) for the S3 and GCS
// drivers' tests: each below a prefix no other store of the process uses,
// its bucket created.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <string_view>

#include "cairn/kvstore/testing/emulator_server.h"

namespace cairn::testing {

// "<tag><run>/<n>/": `run` random per process, `n` counting up.
inline std::string FreshPrefix(std::string_view tag) {
  static std::atomic<int> counter{0};
  static const uint64_t run = std::random_device{}();
  return std::string(tag) + std::to_string(run) + "/" + std::to_string(counter++) + "/";
}

// Opens a Store (S3KvStore or GcsKvStore) with `options` (endpoint and
// prefix filled in here when empty) on the running emulator, `endpoint`
// being MotoEndpoint or FakeGcsEndpoint, and creates its bucket. Null, with
// a test failure, when the emulator or the store cannot be had.
template <typename Store, typename Options>
std::shared_ptr<Store> OpenOnEmulator(Options options, const Result<std::string>& endpoint,
                                      std::string_view prefix_tag = "run") {
  if (!endpoint.ok()) {
    ADD_FAILURE() << endpoint.status().ToString();
    return nullptr;
  }
  if (options.endpoint.empty() || options.endpoint.rfind("https://storage.googleapis.com", 0) == 0) {
    options.endpoint = *endpoint;
  }
  if (options.prefix.empty()) options.prefix = FreshPrefix(prefix_tag);
  auto store = Store::Open(options);
  if (!store.ok()) {
    ADD_FAILURE() << store.status().ToString();
    return nullptr;
  }
  Status created = (*store)->CreateBucket();
  if (!created.ok() && created.message().find("BucketAlreadyOwnedByYou") == std::string_view::npos) {
    ADD_FAILURE() << created.ToString();
    return nullptr;
  }
  return *store;
}

}  // namespace cairn::testing
