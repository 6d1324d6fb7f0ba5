// KvBatchWriter: many values written into one store, made visible together.
//
// A writer that streams values as they come and publishes them at Commit:
// the OCDBT batch writer (ocdbt/io/ocdbt_batch_writer.h) appends each value
// to the database's data files straight from the caller's memory and writes
// one new generation at Commit; the default writer (NewPutEachBatchWriter)
// Puts each value as it comes, so on plain stores values are visible (and
// durable) one by one and Commit does nothing more. A prefix view
// (prefix/prefix_kvstore.h) gets its base store's writer with the prefix
// added to every key, so `...|ocdbt:path/` batches as OCDBT itself does.
//
// Thread safety: Add may be called concurrently from many threads; Commit is
// called once, after every Add returned.
#pragma once

#include <memory>
#include <string>

#include "cairn/kvstore/kvstore.h"

namespace cairn {

class KvBatchWriter {
 public:
  virtual ~KvBatchWriter() = default;
  // Writes `value` under `key`. The writer keeps no reference to `value`
  // after it returns. A key added twice: the last Add wins.
  virtual Status Add(std::string key, ByteView value) = 0;
  // Removes `key` (OK when it is absent), in the same batch: the OCDBT
  // writer commits the removal with the added values; the default writer
  // deletes at once. Among Add and Delete of one key, the last call wins.
  virtual Status Delete(std::string key) = 0;
  // Makes every added value visible, durably. Call once.
  virtual Status Commit() = 0;
};

// The default writer: Put per Add on `store` (kept alive by the writer).
std::unique_ptr<KvBatchWriter> NewPutEachBatchWriter(std::shared_ptr<KvStore> store);

// The best writer for `store`: its own (KvStore::OpenBatchWriter) when
// Capabilities().batch_writer (OCDBT's streaming writer, or through a prefix
// view its base's with the keys prefixed), else NewPutEachBatchWriter.
std::unique_ptr<KvBatchWriter> NewBatchWriter(std::shared_ptr<KvStore> store);

// For views over another store (prefix/): `base` with `prefix` added to every
// key (each key is validated first); nullptr when `base` is nullptr.
std::unique_ptr<KvBatchWriter> NewPrefixedBatchWriter(std::unique_ptr<KvBatchWriter> base, std::string prefix);

}  // namespace cairn
