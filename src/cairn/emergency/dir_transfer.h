// Copying one step directory from one process to another over a
// PeerTransport, checksummed, within a memory budget.
//
// Protocol (sender and receiver agree on the peer, the tag and the
// transfer's name beforehand; every message is checked against them; the
// receiver answers on `tag + PeerTransport::kMaxTransferTag`; each side
// holds a PeerTransport::Expect on the tag it receives on for the whole
// transfer, so that a transport that drops what nobody expects keeps its
// messages, and drops what is left of it at the end):
//   1. The sender lists the files below the directory (but owner records
//      of saves, layout/orbax/save_owner.h: bookkeeping, never data, and a
//      receiver refuses them) and sends a header:
//      JSON {"transfer": <name>, "ok": bool, "error": text, "source": id,
//      "files": [{"path": relative path, "size": bytes}, ...]}; `source`
//      is the crc32c of the directory's `_CHECKPOINT_METADATA` (written
//      afresh by every save, so a re-saved step has another id). A sender
//      that has nothing to send (its save failed) sends ok=false and stops,
//      so that the receiver fails at once instead of waiting for its timeout.
//   2. The receiver looks for the resumable pending sibling of the
//      destination (`<dst>.orbax-checkpoint-tmp-resumable`, step.h) and its
//      record `cairn_transfer.json` (the header it was started for). If the
//      record equals this header (name, source, files), what it holds is
//      kept: every file already committed at its full size, and of a file
//      cut short the pieces committed under `cairn_transfer_parts/<file
//      index>/<offset>.<crc32c>` that follow each other from offset 0 and
//      still match their crc32c (for a file written in place, step 4: the
//      parts are empty markers and the file's bytes at each marker's
//      offset must match its crc32c; the file counts as committed only
//      with its marker `cairn_transfer_parts/<file index>/complete`).
//      Otherwise the pending sibling (and an older
//      copy at `dst`) is removed and started afresh with the record. The
//      receiver answers {"have": [bytes held of each file, from offset 0]}.
//      A receiver that refuses the header (malformed, another transfer) or
//      fails here answers {"abort": error} instead, so that the sender
//      fails at once too. Whenever a receiver aborts, it then discards what
//      its sender still sends up to the sender's end frame (step 3), so
//      that nothing of this transfer is left for the next one under the tag
//      (after a refused header it waits at most 10 s for it: the message it
//      refused may have come from no transfer at all).
//   3. The sender checks the answer (no more than each file's size, whole
//      pieces) and sends, file by file in order, the pieces from there on:
//      at most `piece_bytes`, each a 20-byte frame (file index u32, crc32c
//      u32 of the data, offset u64, all little-endian; the length is the
//      rest) and the data, counted against the budget and released once
//      sent: on a RAM disk (MappedReadStore) the file's own pages, mapped,
//      which the transport's cipher copies into the message
//      (SendFramedFrom); elsewhere read into a buffer the transport sends
//      as it is (SendFramed). Before each piece it looks (without
//      waiting) for an abort from the receiver (step 4). On an abort, here
//      or in steps 2 and 6, it stops, sends an end frame (file index
//      0xffffffff, no data) in place of the rest, and fails naming the
//      receiver and its error.
//   4. The receiver checks each frame (file index and offset in sequence,
//      crc32c of the data; DataLoss naming the file otherwise). A file of
//      one piece is written and committed at once. A longer file, where the
//      store can write in place (file driver), gets each checked piece
//      written at its offset in the file (cut to the bytes kept in step 2
//      when opened) and then an empty marker part `<offset>.<crc32c>`;
//      after the last piece the file is synced and the marker `complete`
//      written. Elsewhere its pieces are committed one by one as parts
//      holding the data (step 2), and when the last has arrived the file is
//      written from its parts, committed (durable), and the parts removed.
//      An interruption anywhere keeps what was committed for the next
//      attempt. A receiver that fails here for any reason but the
//      transport's (a piece fails its check, a write fails) answers
//      {"abort": error} and discards the pieces still to come, up to the
//      sender's end frame.
//   5. After the last file the receiver removes the parts and the record,
//      publishes the directory (step.h: commit_success.txt, everything
//      synced, renamed, parent synced) and answers {"done": true} (or
//      {"abort": error} when publishing failed). Listings ignore pending
//      directories: a copy is either complete and checked, or absent.
//   6. The sender returns once that last answer came: its result is the
//      receiver's.
//
// Design notes:
//   - Receiving in place (step 4) is what makes a lost host's fetch cost one
//     write of its step: with parts holding the data, every file was written
//     twice into fresh RAM-disk pages (parts, then the joined file) and the
//     fetch took several times as long. Parts stay for stores without
//     positional writes.
//   - The sender reads each piece into a buffer. Sending from a mapping of
//     the sender's file was faster alone, but slower during a restore, when
//     the same process maps its own step at the same time (mapping and
//     unmapping per piece contend with those populates). Pieces of 4 MiB
//     instead of 16 MiB showed no gain.
//
// Thread safety: one transfer per (peer, tag) at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "cairn/emergency/transport.h"
#include "cairn/engine/byte_budget.h"
#include "cairn/kvstore/positional_write.h"
#include "cairn/layout/orbax/location.h"

namespace cairn::emergency {

struct TransferOptions {
  uint64_t piece_bytes = uint64_t{16} << 20;
  engine::ByteBudget* budget = nullptr;  // required
  PeerTransport::Duration timeout = std::chrono::minutes(10);  // per message
  // Test hook: called with "transfer_half_sent" / "transfer_half_received"
  // once half of the data to move in this attempt has been sent / received
  // (a test kills the process there).
  std::function<void(std::string_view)> at_point;
  // Receive a file longer than a piece straight into its place when the
  // destination store can write in place (positional_write.h: the file
  // driver); else (or when false) as parts joined at the end.
  bool write_in_place = true;
};

inline constexpr std::string_view kPointTransferHalfSent = "transfer_half_sent";
inline constexpr std::string_view kPointTransferHalfReceived = "transfer_half_received";

// The save id of a receipt's pending directory (step 2):
// `<dst>.orbax-checkpoint-tmp-resumable`.
inline constexpr std::string_view kReceiptSaveId = "resumable";

// Sends the directory `src` (or, with `!source_status.ok()`, only a header
// carrying that error). Returns the bytes of file data sent (without what
// the receiver already held).
Result<uint64_t> SendDirectory(PeerTransport& transport, int dest, int tag, const std::string& name,
                               const orbax::Location& src, const Status& source_status,
                               const TransferOptions& options);

// Receives a directory into `dst` (replacing an older copy there, resuming
// an interrupted transfer of the same source). Returns the bytes of file
// data received in this attempt.
Result<uint64_t> ReceiveDirectory(PeerTransport& transport, int source, int tag, const std::string& name,
                                  const orbax::Location& dst, const TransferOptions& options);

}  // namespace cairn::emergency
