// Whether a store's reads are best asked for all at once (KvStore::GetMany)
// rather than key by key.
//
// An OCDBT database answers every Get of the latest generation after a
// manifest read and a walk down its B+tree; GetMany reads the manifest once
// and walks the tree once for all its keys, and fetches values that lie
// close together in a data file with one request. A prefix view
// (`...|ocdbt:path/`) batches as its base does. Other stores gain nothing
// from it: the callers keep their own concurrency (many Gets at once).
#pragma once

#include "cairn/kvstore/kvstore.h"

namespace cairn {

// The store's Capabilities().batched_reads: true for an OcdbtKvStore, and
// for a view (prefix, forwarding) whose base is one. Defined in
// batch_writer.cc.
bool PrefersBatchedReads(const KvStore& store);

}  // namespace cairn
