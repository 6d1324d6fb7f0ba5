// The requests of one S3 multipart upload, shared by S3KvStore::Put (a large
// value held whole, parts sent together: s3_multipart.cc) and the streamed
// writer of S3KvStore::OpenWriter (parts sent as they fill: s3_writer.cc).
//
// Requests (steps at the top of s3_multipart.cc):
//   Start      POST <key>?uploads                      -> UploadId
//   PartCall   PUT  <key>?partNumber=<n>&uploadId=<id> -> ETag (RecordPart)
//   Complete   POST <key>?uploadId=<id> with the (part number, ETag) list;
//              a lost answer settled by a HEAD of the key (its ETag)
//   Abort      DELETE <key>?uploadId=<id> (no object, no stored parts)
//
// Errors name the key and URL of the store, the step and part, the method,
// the request URL and the HTTP status (http::HttpStatusError).
//
// Thread safety: PartCall and RecordPart may be called concurrently (the
// ETags are guarded); Start, Complete and Abort by one thread, with no part
// in flight.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/kvstore/http/http_client.h"
#include "cairn/kvstore/s3/s3_kvstore.h"

namespace cairn::s3 {

// The ETag S3 gives an object completed from parts with these ETags (each
// the quoted or bare hex MD5 of its part): the hex MD5 of the parts' binary
// MD5s, '-', the number of parts. nullopt when a part's ETag is not an MD5.
std::optional<std::string> MultipartEtag(const std::vector<std::string>& part_etags);

class S3MultipartUpload {
 public:
  // S3's limit on the number of parts of one upload.
  static constexpr int kMaxParts = 10000;

  // `what` is added to the operation ("multipart upload", "streamed
  // multipart upload"). REQUIRES: `store` outlives this object.
  S3MultipartUpload(const S3KvStore& store, std::string_view key, std::string_view what);

  // Step 1: starts the upload. Errors: the POST's.
  Status Start();
  bool started() const { return !upload_id_.empty(); }
  const std::string& upload_id() const { return upload_id_; }
  const std::string& operation() const { return op_; }

  // The PUT of part `n` (1-based) carrying `piece` (which must outlive it).
  http::HttpCall PartCall(int n, ByteView piece) const;
  // Checks the answer to part `n`'s PUT and keeps its ETag.
  Status RecordPart(int n, const http::HttpCall& call, Result<http::HttpResponse> response);
  // Step 3: completes the upload with the parts 1..parts recorded.
  Status Complete(int parts);
  // Step 4: aborts the upload (when started and not completed); errors of
  // the DELETE are ignored (the caller reports what made it abort).
  void Abort();

 private:
  // Step 3b: whether the key holds the object these parts complete to.
  bool CompletedBefore(const std::vector<std::string>& etags) const;

  const S3KvStore& store_;
  std::string object_;
  std::string op_;
  std::string upload_id_;
  bool completed_ = false;
  std::mutex mu_;
  std::vector<std::string> etags_;  // by part number - 1; guarded by mu_
};

}  // namespace cairn::s3
