// DataFileWriter: appends blobs (out-of-line values, B+tree nodes,
// version-tree nodes) to new data files `<prefix><32 random hex>` of a base
// KvStore, streaming them through KvStore::OpenWriter, so a large value goes
// from the caller's buffer to the file without a second in-memory copy.
//
// When a blob would take the open file past `target_size` (and the file is
// not empty), the open file is committed first and a new one started; a
// single blob larger than target_size gets a file of its own. target_size 0
// means unlimited (one file per Finish).
//
// Durability: a file is durable (KvWriter::Commit) when it rolls over and on
// Finish; the caller writes the manifest that refers to the files only after
// Finish returned OK (protocol in ocdbt_commit.cc). Files of an abandoned
// writer are unlinked if still open, or stay behind unreferenced. With a
// full-file handler (set_full_file_handler), a file that rolls over is handed
// to the handler instead of being committed in Append, and the caller must
// wait for the handler's commits too before writing the manifest.
//
// Thread safety: not thread-safe; one writer per commit.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cairn/kvstore/kvstore.h"
#include "cairn/kvstore/ocdbt/format/data_file.h"
#include "cairn/util/buffer.h"

namespace cairn::ocdbt {

class DataFileWriter {
 public:
  // REQUIRES: `base` outlives the writer.
  DataFileWriter(KvStore* base, std::string prefix = "d/", uint64_t target_size = 0,
                 uint64_t value_alignment = 0);

  // Appends `bytes` to the open data file (starting one if needed) and
  // returns where they are. Errors: those of the base store's writes.
  Result<IndirectDataReference> Append(ByteView bytes);

  // Commits the open data file, if any. Later Appends start a new file.
  Status Finish();

  // Takes each file that rolls over (is full) in place of the commit Append
  // would do: `file` is that file's writer, not yet committed, and the
  // handler commits it (the OCDBT batch writer starts its upload at once, on
  // another thread). An error from the handler is returned by that Append.
  using FullFileHandler = std::function<Status(std::unique_ptr<KvWriter> file, const DataFileId& id)>;
  void set_full_file_handler(FullFileHandler handler) { full_file_handler_ = std::move(handler); }

  // Ends the open data file now, as if it were full: hands it to the
  // full-file handler (without one: commits it). Later Appends start a new
  // file. OK when no file is open.
  Status RollOver();

  // Bytes in the open data file (0 when none is open).
  uint64_t open_size() const { return open_ ? open_->size() : 0; }

  // Ids of every file started so far (committed or open).
  const std::vector<DataFileId>& files() const { return files_; }
  uint64_t bytes_written() const { return bytes_written_; }

 private:
  Status Start();

  KvStore* base_;
  std::string prefix_;
  uint64_t target_size_;
  uint64_t value_alignment_;
  std::unique_ptr<KvWriter> open_;
  FullFileHandler full_file_handler_;
  std::vector<DataFileId> files_;
  uint64_t bytes_written_ = 0;
};

// A new data file name: `prefix` + 32 random lowercase hex digits.
std::string NewDataFileName(std::string_view prefix);

}  // namespace cairn::ocdbt
