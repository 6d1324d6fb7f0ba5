// Restore: fill the boxes this process needs from an Orbax PyTree item.
//
// A request lists arrays by Orbax param name and, for each, the boxes this
// process wants with their destination buffers (any sharding: boxes need not
// line up with the stored chunks). Only the chunks a box intersects are
// read; all boxes of all arrays are read in parallel on the shared thread
// pool, each chunk decoded straight into the destination when chunk and box
// line up (ZarrArray::Read), else through one chunk-sized buffer; or, for
// boxes that allow it (BoxToRestore::mapped), not read at all but mapped.
//
// Thread safety: Restore may be called concurrently for different requests.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/coordinator.h"
#include "cairn/dtype/dtype.h"
#include "cairn/interrupt.h"
#include "cairn/kvstore/mapped_read.h"
#include "cairn/util/box.h"
#include "cairn/result.h"

namespace cairn::orbax {
struct OrbaxItem;  // layout/orbax/item_store.h
}  // namespace cairn::orbax

namespace cairn::engine {

struct BoxToRestore {
  Box box;                          // global coordinates
  void* data = nullptr;             // element at box.origin
  std::vector<Index> byte_strides;  // empty: C-contiguous over box.shape
  // When set, the restore may hand out the stored chunk's own pages instead
  // of filling `data`: when the box is exactly one stored chunk, `data` is
  // C-contiguous, the chunk is stored as is (identity codec chain, no
  // sharding codec) and the store maps it (kvstore/mapped_read.h: a file on
  // tmpfs/ramfs at a page-aligned offset). Then *mapped holds the box's
  // elements in C order (a private, writable mapping; it stays valid after
  // the checkpoint is deleted) and `data` is left untouched; otherwise
  // *mapped is left null and `data` filled.
  std::shared_ptr<MappedBytes>* mapped = nullptr;
};

struct ArrayToRestore {
  std::string param;  // "params.w" (orbax::ParamName of the key path)
  // When set, the stored array must have this dtype (InvalidArgument else).
  std::optional<DType> dtype;
  std::vector<BoxToRestore> boxes;
  // The boxes other processes of the same restore read (any order,
  // repeats allowed; empty for a single process). Where one of them touches
  // a chunk this process reads too, the processes read the same bytes, and
  // the restore keeps its reads in the page cache, which processes on one
  // host share; else large reads bypass it (KvStore::SetReadsShared).
  std::vector<Box> boxes_of_other_processes;
};

// How the processes of one host share decoding (restore_host_share.h).
struct RestoreHostShareOptions {
  std::string directory = "/dev/shm";  // of the shared file; empty: never share
  // The shared window per host, reused round after round; also at most
  // half the free space of `directory`. A mapped window (the processes' boxes
  // become its pages: restore_host_share.h, step 3) is bounded by that free
  // space alone.
  uint64_t max_bytes = uint64_t{512} << 20;
  Coordinator::Duration timeout = std::chrono::minutes(10);
  // Observer, called on the restoring thread at the named points of
  // restore_host_share.h (kPointWindowOpened); crash tests kill the
  // process there.
  std::function<void(std::string_view)> at_point;
};

// What a restore did with its chunks.
struct RestoreStats {
  int64_t chunks_read = 0;              // read and decoded by this process for itself only
  int64_t host_share_rounds = 0;        // rounds of the host's shared window (restore_host_share.h)
  int64_t chunks_decoded_for_host = 0;  // owned: decoded into the host's shared file
  int64_t chunks_from_host = 0;         // copied out of another process's decoding
  int64_t chunks_fallen_back = 0;       // owned by another process that failed: decoded here
  int64_t chunks_mapped_from_host = 0;  // of those decoded for and from the host: handed out as
                                        // mappings of the host's file, not copied
};

struct RestoreRequest {
  // An item directory, a step directory or a checkpoint root (the latest
  // finalized step), as orbax::ResolveItemDirectory takes them.
  std::string directory;
  std::string item_name;
  // The item, when the caller already opened it (orbax::OpenItem: its
  // metadata read, its OCDBT database pinned): used instead of opening
  // `directory` again, so its files and manifest are not read twice.
  std::shared_ptr<const orbax::OrbaxItem> item;
  std::vector<ArrayToRestore> arrays;
  // The processes restoring together. With several, every one of them must
  // call Restore with its coordinator; those on one host then decode each
  // compressed chunk that two or more of them need once, and copy their
  // parts out of a shared-memory file (restore_host_share.h). Null: this
  // process restores alone.
  Coordinator* coordinator = nullptr;
  RestoreHostShareOptions host_share;
  RestoreStats* stats = nullptr;  // filled in when set
  // Called with (bytes of the requested boxes filled, their total), now and
  // then and once at the end (progress.h); may be empty.
  std::function<void(uint64_t bytes_done, uint64_t bytes_total)> progress;
  // Requested: the restore stops at its next chunk (kCancelled). May be null.
  const Interrupt* interrupt = nullptr;
};

// Errors: NotFound for a missing item or param; InvalidArgument for a box
// outside the array or a dtype mismatch; DataLoss for corrupt chunks; each
// naming the param and the item directory.
Status Restore(const RestoreRequest& request);

}  // namespace cairn::engine
