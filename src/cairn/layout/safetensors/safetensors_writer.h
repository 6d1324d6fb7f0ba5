// Writes safetensors checkpoints through a KvStore, streaming: each file is
// written front to back with KvStore::OpenWriter, so a tensor never has to
// sit whole in memory and nothing is copied twice.
//
// Files are laid out as the safetensors package lays them out (BuildHeader),
// so boxes must arrive in storage order: `write_order()` lists the tensors in
// that order, and within a tensor the boxes must be consecutive row-major
// slabs (each the next bytes of the tensor). Anything else is
// FailedPrecondition naming the tensor.
//
// Commit protocol (durability, numbered as the code does it):
//   1. Each file is written through its own KvWriter and committed (atomic
//      and durable, per the store's protocol) as soon as its last byte is in.
//   2. Commit checks that every byte of every tensor was written.
//   3. For a sharded set, `model.safetensors.index.json` is written last with
//      Put: it is the set's commit marker. A single file needs no marker: its
//      atomic commit in step 1 is the commit.
// An interrupted writer leaves no visible file (single file) or files
// without their index (sharded), which readers of sharded sets refuse.
//
// Thread safety: one thread at a time.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cairn/kvstore/kvstore.h"
#include "cairn/layout/checkpoint_format.h"

namespace cairn::safetensors {

struct WriterOptions {
  // 0: one file, `file_name`. Otherwise tensors are packed, in storage
  // order, into files of at most this many bytes (a larger tensor gets a
  // file of its own), named model-00001-of-00003.safetensors, plus the index.
  uint64_t max_file_bytes = 0;
  std::string file_name = "model.safetensors";
  std::map<std::string, std::string> metadata;  // "__metadata__" of every file
};

class SafetensorsWriter : public layout::CheckpointWriter {
 public:
  // The tensor names in the order their bytes must be written.
  virtual const std::vector<std::string>& write_order() const = 0;
  const std::vector<std::string>* required_order() const override { return &write_order(); }
  // The keys of the files, in order.
  virtual std::vector<std::string> file_keys() const = 0;
};

// `prefix` is "" or ends in "/". `arrays` gives names, dtypes and shapes.
Result<std::unique_ptr<SafetensorsWriter>> CreateWriter(std::shared_ptr<KvStore> store,
                                                        std::string prefix,
                                                        const std::vector<layout::ArrayInfo>& arrays,
                                                        WriterOptions options);

}  // namespace cairn::safetensors
