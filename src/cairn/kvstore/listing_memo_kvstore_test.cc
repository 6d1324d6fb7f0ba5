// ListingMemoKvStore passes the KvStore conformance suite over a memory
// store: every answer it remembers is forgotten by the writes that follow,
// so the suite's writes-then-lists see what they wrote.
#include "cairn/kvstore/listing_memo_kvstore.h"

#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/kvstore/testing/conformance.h"

namespace cairn {
namespace {

const bool kRegistered = RegisterKvStoreConformanceTests("ListingMemoOverMemoryConformance", [] {
  return std::make_shared<ListingMemoKvStore>(std::make_shared<MemoryKvStore>());
});

}  // namespace
}  // namespace cairn
