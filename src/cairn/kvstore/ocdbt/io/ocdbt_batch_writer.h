// The OCDBT batch writer: values streamed into new data files of one
// database as they are added, one commit for all of them.
//
// Protocol:
//   1. Add: a value of at most max_inline_value_bytes (the database's
//      config, or the options' for a new database) is kept inline in memory;
//      a larger one is appended straight from the caller's buffer to one of
//      up to 4 open data files `d/<random>` (data_file_writer.h: a file
//      reaching target_data_file_size is made durable and the next one
//      started), each written by one thread at a time, so that a thread
//      blocked on the device does not stall the others. Nothing refers to
//      these files yet. Delete records a removal of the key.
//      On an object store (a base with io_concurrency() > 0, whose writers
//      hold a value in memory and upload it whole at their commit), data
//      files are uploaded before Commit, on background threads, while Adds
//      go on: an Add that finds no upload under way ends its lane's open
//      file if it holds at least OcdbtOptions::upload_file_size bytes
//      (16 MiB) times 2^(files ended so far) and starts uploading it (one
//      early upload at a time, each at least twice the one before: few
//      objects, which buckets and emulators charge for), and a file reaching
//      target_data_file_size is uploaded at once too (at most 2-8 files
//      queued or uploading; an Add that fills one more waits for room). The
//      4 files still open are uploaded at Commit. Such a file is durable
//      early but still unreferenced: no manifest names it before step 3.
//   2. Commit: the open data files are made durable (all at once), and every
//      early upload of step 1 has finished OK (else Commit fails and nothing
//      is committed),
//   3. then the entries (sorted, the last Add or Delete of a key wins) are
//      committed as one new generation with OcdbtKvStore::CommitEntries
//      (B+tree nodes, then the manifest, last).
// A writer abandoned before Commit (or whose upload failed) leaves only
// unreferenced data files; its destructor waits for uploads under way.
//
// Thread safety: as KvBatchWriter (Add concurrently, Commit once).
#pragma once

#include <memory>

#include "cairn/kvstore/batch_writer.h"
#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"

namespace cairn::ocdbt {

std::unique_ptr<KvBatchWriter> NewOcdbtBatchWriter(std::shared_ptr<OcdbtKvStore> store);

}  // namespace cairn::ocdbt
