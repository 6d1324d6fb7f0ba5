// The KvStore conformance suite: behaviour every driver must share.
//
// A driver's test registers the suite once with a factory that makes a fresh,
// empty store per check:
//
//   const bool kRegistered = cairn::RegisterKvStoreConformanceTests(
//       "MemoryConformance", [] { return std::make_shared<cairn::MemoryKvStore>(); });
//
// This adds one GoogleTest test per check, named `<suite>.<Check>` (GetMissing,
// PutGet, GetIntoWholeValue, GetManyMatchesGet, Overwrite, EmptyValue, ByteRanges, PutIfAbsent, CompareAndPut,
// DeleteMissing,
// ListPrefixSortedWithSizes, InvalidKeys, ConcurrentPuts, ApplyBatch,
// DeletePrefix, LargeValue, ListChildren,
// PrefixCommitPublishes, PrefixCommitIgnoresStraggler). Call it during static initialization (as above)
// or before RUN_ALL_TESTS.
//
// Thread safety: registration is not thread-safe (GoogleTest's registry).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "cairn/kvstore/kvstore.h"

namespace cairn {

using KvStoreFactory = std::function<std::shared_ptr<KvStore>()>;

// Registers the suite; returns true (so it can initialize a static).
bool RegisterKvStoreConformanceTests(const std::string& suite, KvStoreFactory factory);

// Deterministic pseudo-random bytes for test values.
Buffer TestBytes(size_t size, uint32_t seed);

}  // namespace cairn
