// Copying one step directory from one process to another over a
// PeerTransport, checksummed, within a memory budget.
//
// Protocol (sender and receiver agree on the peer, the tag and the
// transfer's name beforehand; every message is checked against them):
//   1. The sender lists the files below the directory and sends a header:
//      JSON {"transfer": <name>, "ok": bool, "error": text,
//      "files": [{"path": relative path, "size": bytes}, ...]}. A sender
//      that has nothing to send (its save failed) sends ok=false, so that
//      the receiver fails at once instead of waiting for its timeout.
//   2. The sender sends every file in order, in pieces of at most
//      `piece_bytes`: a 20-byte frame (file index u32, crc32c u32 of the
//      data, offset u64, all little-endian; the length is the rest) and
//      the data. Each piece is read into a buffer counted against the
//      budget and released once sent.
//   3. The receiver checks each frame (file index and offset in sequence,
//      crc32c of the data; DataLoss naming the file otherwise) and streams
//      the data into the file under a pending sibling of the destination
//      (`<dst>.orbax-checkpoint-tmp-<id>`, step.h); each file is committed
//      (durable) when its last piece arrives.
//   4. After the last file the receiver publishes the directory (step.h:
//      commit_success.txt, everything synced, renamed, parent synced). An
//      interrupted transfer leaves only a pending directory, which listings
//      ignore and the next transfer of the same destination removes: a copy
//      is either complete and checked, or absent.
//
// Thread safety: one transfer per (peer, tag) at a time.
#pragma once

#include <cstdint>
#include <string>

#include "cairn/emergency/transport.h"
#include "cairn/engine/byte_budget.h"
#include "cairn/layout/orbax/location.h"

namespace cairn::emergency {

struct TransferOptions {
  uint64_t piece_bytes = uint64_t{16} << 20;
  engine::ByteBudget* budget = nullptr;  // required
  PeerTransport::Duration timeout = std::chrono::minutes(10);  // per message
};

// Sends the directory `src` (or, with `!source_status.ok()`, only a header
// carrying that error). Returns the bytes of file data sent.
Result<uint64_t> SendDirectory(PeerTransport& transport, int dest, int tag, const std::string& name,
                               const orbax::Location& src, const Status& source_status,
                               const TransferOptions& options);

// Receives a directory into `dst` (replacing an older copy there). Returns
// the bytes of file data received.
Result<uint64_t> ReceiveDirectory(PeerTransport& transport, int source, int tag, const std::string& name,
                                  const orbax::Location& dst, const TransferOptions& options);

}  // namespace cairn::emergency
