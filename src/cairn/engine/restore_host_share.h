// Host-shared decoding: the processes of one host that need the same
// compressed chunk decode it once between them.
//
// Restoring onto another sharding (saved by rows, restored by columns), each
// process of a host needs a part of nearly every stored chunk, and each
// would read and decode every chunk: N processes, N times the decoding, the
// slowest part of a restore of compressed chunks. With a coordinator, the
// processes of a host split those chunks instead: each decodes its share
// into one shared-memory file of the host, and every process copies its
// parts out of it. Processes on different hosts share nothing.
//
// Protocol (every process of a coordinated restore, in this order; restore.cc
// runs step 1 and the reads, this file the rest):
//   1. Plan the reads (restore.cc). Candidates are the chunks read whole
//      (not a shard's index first), not mapped, with a codec chain that
//      changes the bytes, and at least kMinSharedBytes decoded.
//   2. All-gather "needs": host id (host name and boot id), the item
//      directory, a random token and the window name it would give (token
//      and its own owner tag, step 4a), the free bytes of the shared-memory
//      directory, the window size it allows, whether step 1 succeeded, and
//      the candidates (key, decoded bytes, and whether the chunk's box is a
//      whole destination that may be handed out as a mapping:
//      BoxToRestore::mapped). A process whose step 1 failed still takes
//      part, without candidates, and in every collective after.
//   3. Every process computes the same assignment from the gathered needs:
//      per host and directory, the candidates two or more of its processes
//      need, in key order, each given to the needing process with the fewest
//      bytes so far, at the next page-aligned offset of the host's window;
//      a chunk that does not fit starts the next round at offset 0. The
//      window is at most the smallest size allowed and half the smallest free
//      space reported; a larger chunk is not shared. The number of rounds is
//      the largest of any host's. None anywhere: the protocol ends here.
//      A mapped window: when every process that needs each shared chunk
//      may take it as a mapping, and all of them fit in half the smallest
//      free space, the window holds them all in one round (the size
//      allowed does not apply): it is not reused, because it becomes the
//      processes' arrays (step 7), memory they would have allocated anyway.
//   4. (Step 4a runs first, at step 2, in every process that shares.) Open
//      (creating) and map `<shm dir>/cairn-restore-<token>.owner-
//      <pid>-<start ticks>-<machine>`, token and owner those of the host's
//      first process, of the window's size.
//   4a. The owner sweep (util/shared_memory_file.h, steps 1-4): a window's
//       name carries the process that named it; a window whose owner is
//       gone from this machine (pid free, or reused by a process that
//       started at another time) is unlinked. Its owner took part in every
//       collective of its restore, so once it is dead no live process can
//       get past round 0 with it (step 6), and after round 0 every process
//       has unlinked the name anyway. A window that cannot be attributed
//       (another machine tag, or a name without owner from older cairn) is
//       unlinked only when it has not changed for kUnattributedWindowAge
//       (24 h: far above a name's life, creation to round 0, which the
//       collective timeout bounds). A live owner's window is never removed.
//   Then, for each round r:
//   5. Decode the round's chunks this process owns into the window (its own
//      parts copied out as well).
//   6. All-gather "round r done": whether this process has the window mapped
//      and decoded every chunk it owns so far, and which file it mapped
//      (device and inode). After round 0's, every process unlinks the file's
//      name (all have opened it or failed to).
//   7. Copy its parts of the round's chunks owned by others out of the
//      window; a chunk whose owner failed, or mapped another file than this
//      process (the name was removed and created again between their
//      openings), goes to the fallback list. In a mapped window, a process
//      maps each chunk's pages privately (copy-on-write) as its destination
//      instead of copying them, its own chunks too (right after step 5):
//      the replicas of a shard on one host then hold one copy of its
//      pages, and nobody fills fresh memory for them. A mapping that fails
//      is copied instead.
//   8. Barrier "round r copied" (not after the last round): the window is
//      overwritten only once everyone has copied.
// After the rounds, restore.cc reads and decodes every other chunk and the
// fallback list privately. A failed collective (timeout) turns sharing off
// for the rest of the restore: what is left, owned chunks included, goes to
// the fallback list. So a restore never depends on another process for its
// result, only for its speed, and a process that never comes costs the
// others one timeout.
//
// Thread safety: one HostShare per Restore call; Owns/Decoded/Region may be
// called from the read threads of step 5 concurrently.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cairn/coordinator.h"
#include "cairn/engine/restore_plan.h"
#include "cairn/util/shared_memory_file.h"

namespace cairn::engine {

inline constexpr uint64_t kMinSharedBytes = 64 << 10;

// Windows are named `kWindowPrefix<token>.owner-...` (step 4).
inline constexpr std::string_view kWindowPrefix = "cairn-restore-";
// Step 4a's bound for windows that cannot be attributed.
inline constexpr std::chrono::hours kUnattributedWindowAge{24};
// Named points (RestoreHostShareOptions::at_point): the window is open and
// mapped, before any chunk is decoded into it.
inline constexpr std::string_view kPointWindowOpened = "host_share_window_opened";

// Tests only: the process with this index fails to open the shared file
// (as on a host without room in /dev/shm); -1, the default, for none.
void SetHostShareOpenFailureForTesting(int process_index);

class HostShare {
 public:
  enum class Role : uint8_t { kSelf, kOwner, kPeer };

  // Steps 2-4. `planned` is step 1's status; `plans` is empty when it
  // failed. Never fails: problems leave every chunk kSelf.
  static std::unique_ptr<HostShare> Start(Coordinator& coordinator, const RestoreHostShareOptions& options,
                                          const std::string& item_directory, bool planned,
                                          const std::vector<ArrayRestorePlan>& plans,
                                          const std::vector<std::vector<bool>>& mapped);
  ~HostShare();

  Role role(size_t array, size_t chunk) const;

  // Step 5, for a chunk this process owns: decodes `value` into the file
  // and copies this process's parts out.
  Status DeliverOwned(const ArrayRestorePlan& p, size_t array, size_t chunk, std::optional<ByteView> value);

  using Chunks = std::vector<std::pair<size_t, size_t>>;  // (array, chunk)
  using DecodeFn = std::function<Status(const Chunks& owned)>;
  struct Outcome {
    Status status;    // the first error decoding this process's own chunks
    Chunks fallback;  // chunks this process must still read and decode itself
  };

  // Steps 5-7, round by round: `decode` reads the round's chunks this
  // process owns (calling DeliverOwned for each); then the collectives and
  // the copies. `before` is this process's status so far: when it failed,
  // the process only takes part in the collectives. Must be called by every
  // process that called Start, even with a failed `before`.
  Outcome Run(const Status& before, const std::vector<ArrayRestorePlan>& plans, const DecodeFn& decode);

  // Adds what this process did for and with the host to `stats`.
  void AddStats(RestoreStats* stats) const;

 private:
  void CopyFromPeer(const ArrayRestorePlan& p, size_t array, size_t chunk);
  // In a mapped window (step 7), makes the chunk's destination a private
  // mapping of its pages in the window; false where it cannot (not a
  // mapped window, a box that is not one whole destination asking for a
  // mapping, a failed mapping): the caller copies the parts instead.
  bool MapOut(const ArrayRestorePlan& p, size_t array, size_t chunk);

  HostShare() = default;
  Coordinator* coordinator_ = nullptr;
  RestoreHostShareOptions options_;
  std::string name_;
  std::string item_directory_;
  std::vector<std::vector<Role>> roles_;
  std::vector<std::vector<uint64_t>> offsets_;
  std::vector<std::vector<int>> owners_;
  std::vector<std::vector<int>> rounds_of_;
  int rounds_ = 0;  // of every host: the collectives every process takes part in
  std::string path_;
  uint64_t size_ = 0;
  std::unique_ptr<SharedMemoryFile> file_;
  std::atomic<bool> owned_failed_{false};
  std::atomic<int64_t> decoded_for_host_{0};
  std::atomic<int64_t> from_host_{0};
  std::atomic<int64_t> mapped_from_host_{0};
  bool mapped_ = false;  // step 3's mapped window
  int64_t fallen_back_ = 0;
};

}  // namespace cairn::engine
