// The requests of one GCS resumable upload session, shared by
// GcsKvStore::Put (a large value held whole: gcs_upload.cc) and the streamed
// writer of GcsKvStore::OpenWriter (chunks sent as they fill: gcs_writer.cc).
//
// Requests (JSON API, uploadType=resumable):
//   Start      POST .../o?uploadType=resumable&name=<object>; the session URI
//              comes back in Location (X-Upload-Content-Length when known)
//   ChunkCall  PUT <session> with `Content-Range: bytes <a>-<b>/<total or *>`
//              (`bytes */<total>` for an empty last chunk). 308 "Resume
//              Incomplete": its Range header `bytes=0-<n>` says the server
//              kept n + 1 bytes (no header: none); 200/201: finished.
//   Query      PUT <session>, no body, `Content-Range: bytes */*` (or
//              `*/<total>`): how much the server kept, the same answers.
//   Cancel     DELETE <session> (GCS answers 499): no object appears.
//
// SendChunk is the documented way to recover from a failed chunk: after a
// transport error or a 429/5xx it waits (backoff of the store's retry
// policy), asks the session how much it kept (Query) and sends the rest from
// there, never a byte the server already has; chunks must go in order, one at
// a time. (fake-gcs-server 1.54 takes any `bytes */...` as "finish now", so
// the tests that break chunks answer the query in their proxy as GCS does.)
//
// Errors name the key and URL of the store, the offset, the method, the
// session URL and the HTTP status (http::HttpStatusError).
//
// Thread safety: one thread at a time.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "cairn/kvstore/gcs/gcs_kvstore.h"
#include "cairn/kvstore/http/http_client.h"

namespace cairn::gcs {

class GcsResumableSession {
 public:
  // `what` is added to the operation ("resumable upload", "streamed
  // resumable upload"). REQUIRES: `store` outlives this object.
  GcsResumableSession(const GcsKvStore& store, std::string_view key, std::string_view what);

  // Opens the session; `length`: the value's size when known.
  Status Start(std::optional<uint64_t> length);
  bool started() const { return !uri_.empty(); }
  bool finished() const { return finished_; }
  const std::string& uri() const { return uri_; }
  const std::string& operation() const { return op_; }

  // The PUT of `data` at `offset`; `total` set for the last chunk.
  http::HttpCall ChunkCall(uint64_t offset, ByteView data, std::optional<uint64_t> total) const;
  // The bytes the server kept, from a 308's Range header (DataLoss when
  // malformed or beyond `limit`).
  Result<uint64_t> Kept(const http::HttpResponse& r, uint64_t limit) const;

  // Sends `data`, the bytes of the value at `offset` (the server must have
  // kept exactly `offset` bytes so far), resuming after failures as above.
  // With `total` (== offset + data.size()) it is the last chunk and the
  // object is visible when this returns OK. Errors: a non-transient HTTP
  // status, a session that is gone (404/410), the retry budget spent, or a
  // server that loses bytes it had kept (DataLoss).
  Status SendChunk(uint64_t offset, ByteView data, std::optional<uint64_t> total);

  // Cancels the session (unless finished); errors are ignored.
  void Cancel();

 private:
  struct QueryResult {
    bool finished = false;
    uint64_t kept = 0;
  };
  Result<QueryResult> Query(std::optional<uint64_t> total, uint64_t limit);

  const GcsKvStore& store_;
  std::string object_;
  std::string op_;
  std::string uri_;
  bool finished_ = false;
};

}  // namespace cairn::gcs
