// AXLearn's regular checkpoint layout, read and written through a KvStore:
//
//   step_00000100/
//     index                  commit marker and table of contents (axlearn_index.h)
//     gda/<path>/.zarray     one zarr v2 array per tensor, zstd, chunk = a shard
//     gda/<path>/0.0 ...
//     tf_<pid>/ python_<pid>/   input-iterator state (carried, not interpreted)
//
// Write protocol (AXLearn writes in place, without a temporary directory):
//   1. Every array's `.zarray` and chunks are written (each key durable per
//      the store's protocol).
//   2. `index` is written last, with Put: the step exists once it does.
// A step directory without `index` is not a checkpoint: readers refuse it
// and step discovery skips it.
//
// Thread safety: ReadBox may be called concurrently; a writer is used by one
// thread at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cairn/kvstore/kvstore.h"
#include "cairn/layout/axlearn/axlearn_index.h"
#include "cairn/layout/checkpoint_format.h"

namespace cairn::axlearn {

// Written into an uncommitted step by a conversion that can be resumed.
inline constexpr std::string_view kResumeTokenFile = "cairn_convert_resume";

// `step_prefix` is the step directory ("ckpt/step_00000100/" or ""): it must
// hold `index`. Arrays are the index's tensors; their zarr metadata must
// agree with the index (DataLoss otherwise).
Result<std::unique_ptr<layout::CheckpointReader>> OpenReader(std::shared_ptr<KvStore> store,
                                                             std::string step_prefix);

// Reads just the index of the step at `step_prefix`.
Result<StepIndex> ReadIndex(KvStore& store, const std::string& step_prefix);

struct WriterOptions {
  int64_t step = 0;
  // Non-tensor entries of the index (iterator types, scalars), kept in the
  // order given after the tensors are merged in by path.
  std::vector<IndexEntry> other_entries;
  // zstd level of the chunks (AXLearn/TensorStore default: 1).
  int zstd_level = 1;
  // Resuming (CreateWriter only): names the conversion being written. When
  // the step holds the same token (`cairn_convert_resume`, written before
  // any array and removed after the commit), an interrupted run of this
  // very conversion left it, and its complete arrays are kept
  // (ArrayComplete). Empty: no resume.
  std::string resume_token;
};

// Creates the arrays (their `.zarray`, chunks = each array's write_shape,
// at least 1 per dimension as JAX writes them) under `step_prefix`. Refuses
// (AlreadyExists) a step that already has an `index`.
Result<std::unique_ptr<layout::CheckpointWriter>> CreateWriter(
    std::shared_ptr<KvStore> store, std::string step_prefix,
    const std::vector<layout::ArrayInfo>& arrays, WriterOptions options);

// For the other processes of a distributed write: a writer over the arrays
// another process created with CreateWriter (same arrays and options); it
// writes chunks only. Its Commit writes the same index, but only the
// process that created the step should call it.
Result<std::unique_ptr<layout::CheckpointWriter>> AttachWriter(
    std::shared_ptr<KvStore> store, std::string step_prefix,
    const std::vector<layout::ArrayInfo>& arrays, WriterOptions options);

}  // namespace cairn::axlearn
