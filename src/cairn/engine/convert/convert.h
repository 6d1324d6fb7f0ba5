// Converting a checkpoint from one format to another, streaming, within a
// memory budget.
//
// Every destination array is copied in its own chunks (the source's write
// shape by default), each split into row-major slabs that fit the budget,
// so no array larger than the budget ever sits whole in memory. Worker
// threads read, cast and write slabs concurrently; a writer that needs its
// bytes in storage order (safetensors) gets them in that order while
// reading still runs ahead. The destination is committed only after every
// slab is written, so an interrupted conversion leaves nothing that its
// format treats as a checkpoint.
//
// Whole-chunk path: when a destination chunk is one whole source chunk
// (the same chunk grid, the same dtype, an unordered writer), the reader
// hands over the chunk it decoded (CheckpointReader::ReadWholeChunk) and
// the writer encodes straight from it, so no slab is allocated and no byte
// is copied between decoding and encoding. When the writer also reads the
// source's stored bytes as they are (the same StoredChunkForm: e.g. Orbax's
// zarr v3 zstd chunks and AXLearn's zarr v2 zstd chunks), the chunk is not
// even decoded: its stored bytes are copied (CheckpointReader::
// ReadStoredChunk, CheckpointWriter::WriteStoredChunk), at the disk's
// copy speed.
//
// Each stored source chunk is read once: destination chunks are made of
// whole pieces the source decodes at once, and a budget that cannot hold
// one source chunk and one destination chunk is refused (convert_memory.h).
//
// Memory: the slabs in flight, the readers' and writers' buffers for them
// (a chunk being decoded or encoded) and the block cache of freed buffers
// together stay within `memory_budget` (convert_memory.h says how), so the
// peak resident set is the budget plus a fixed overhead.
//
// Thread safety: Convert may be called from any thread; it runs its own
// workers.
#pragma once

#include <functional>
#include <memory>
#include <string_view>

#include "cairn/coordinator.h"
#include "cairn/interrupt.h"
#include "cairn/engine/convert/convert_plan.h"
#include "cairn/layout/checkpoint_format.h"

namespace cairn::engine {

struct ConvertProgress {
  uint64_t bytes_done = 0;   // destination bytes written
  uint64_t bytes_total = 0;
  size_t arrays_done = 0;
  size_t arrays_total = 0;
  double seconds = 0;
};

struct ConvertOptions {
  ConvertPlanOptions plan;
  uint64_t memory_budget = uint64_t{1} << 30;
  int threads = 0;  // 0: twice the hardware's concurrency (at least 4)
  bool verify = false;  // re-read the destination (through `open_dest`) and compare
  // Skip arrays that an interrupted run of the same conversion already
  // wrote completely (CheckpointWriter::ArrayComplete); partial ones are
  // written again.
  bool resume = true;
  // Copy chunks whose stored bytes are valid in the destination as they are
  // stored (zarr/stored_chunk.h); false: decode and encode every chunk.
  bool pass_stored_chunks = true;
  // Called from worker threads (one at a time) after each slab.
  std::function<void(const ConvertProgress&)> progress;
  // Called once, before anything is written, when the budget makes the
  // conversion slow (SlowBudgetWarning); may be empty.
  std::function<void(const std::string&)> warning;
  // Collectives of a distributed conversion time out after this.
  Coordinator::Duration timeout = std::chrono::minutes(30);
  // When requested, the conversion stops at its next slab, before its
  // commit, with StatusCode::kCancelled (interrupt.h); a commit that began completes.
  const Interrupt* interrupt = nullptr;
};

struct ConvertStats {
  size_t arrays = 0;
  size_t arrays_resumed = 0;   // found complete from an interrupted run, not copied again
  // Stored source bytes read (as stored, compressed), when the reader
  // counts them (CheckpointReader::StoredBytesRead); else the source bytes
  // copied. A conversion reads each stored chunk once: this is the
  // source's stored size, not a multiple of it.
  uint64_t bytes_read = 0;
  uint64_t bytes_written = 0;  // destination bytes
  double seconds = 0;
  double verify_seconds = 0;
  // The most bytes charged by slabs in flight: their buffers and the
  // codec memory the reader and writer hold for them (convert_memory.h).
  uint64_t peak_slab_bytes = 0;
  // Chunks copied as stored, not decoded and encoded again (their stored
  // bytes are valid in the destination: zarr/stored_chunk.h).
  uint64_t chunks_copied_stored = 0;
};

using WriterFactory = std::function<Result<std::unique_ptr<layout::CheckpointWriter>>(
    const std::vector<layout::ArrayInfo>& dest_arrays)>;
using ReaderFactory = std::function<Result<std::unique_ptr<layout::CheckpointReader>>()>;

// The message of a conversion interrupted while verifying: the destination
// is committed, not verified. (Interrupted before the commit, the message
// says how far the copy got.)
inline constexpr std::string_view kInterruptedAfterCommit =
    "the conversion was committed, but verifying it was interrupted";

// Plans, creates the writer with the destination arrays, copies, commits;
// then, with options.verify, opens the destination with `open_dest` and
// compares every array with its source, bit for bit after the cast.
Result<ConvertStats> Convert(layout::CheckpointReader& source, const WriterFactory& make_writer,
                             const ReaderFactory& open_dest, const ConvertOptions& options);

// The same, split over the processes of `coordinator` (e.g. `mpirun -n N
// cairn convert ...`). Protocol, every process running it:
//   1. Every process plans (the plan is deterministic).
//   2. The primary creates the destination (`make_writer`); everyone agrees
//      on its status; the others then attach to it (`attach_writer`: open
//      the arrays without creating them).
//   3. The primary asks its writer which arrays an interrupted run already
//      completed (options.resume) and broadcasts the list; every process
//      skips them. Each process copies every n-th remaining destination
//      chunk, within its own budget, and flushes its writer; a destination
//      that needs its bytes in order (safetensors) is copied by the primary
//      alone.
//   4. Everyone agrees that all copies succeeded; only then the primary
//      commits (and verifies, with options.verify); everyone agrees on that.
// A failure anywhere fails the conversion on every process, uncommitted.
// The returned stats add up all processes' bytes.
Result<ConvertStats> ConvertDistributed(layout::CheckpointReader& source,
                                        const WriterFactory& make_writer,
                                        const WriterFactory& attach_writer,
                                        const ReaderFactory& open_dest,
                                        const ConvertOptions& options, Coordinator& coordinator);

// Compares each mapped array of `dest` with `source` (cast and transposed
// as planned), a destination chunk at a time, reading each stored chunk of
// both once when the budget holds a chunk's source and destination bytes
// (convert_verify.cc). DataLoss names the first array and box that differ.
// Stops with StatusCode::kCancelled when `interrupt` (may be null) is requested.
Status VerifyConversion(layout::CheckpointReader& source, layout::CheckpointReader& dest,
                        const std::vector<ArrayMapping>& plan, uint64_t memory_budget,
                        const Interrupt* interrupt = nullptr);

}  // namespace cairn::engine
