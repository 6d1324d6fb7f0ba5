// Multipart upload of one large value: the requests (S3MultipartUpload,
// s3_multipart.h) and S3KvStore::PutMultipart, which sends a value held whole.
// The streamed writer (s3_writer.cc) uses the same requests.
//
// Protocol:
//   1. POST <key>?uploads starts an upload; the response names its UploadId.
//   2. The value is cut into parts of `part_size` bytes (the last may be
//      shorter); every part is PUT as <key>?partNumber=<n>&uploadId=<id> and
//      its ETag kept (PutMultipart: all parts concurrently).
//   3. POST <key>?uploadId=<id> with the list of (part number, ETag) makes
//      the object visible at once (S3 may answer 200 with an <Error> body,
//      which counts as a failure).
//   3b. When the answer to step 3 is lost, the client retries the POST, and
//      S3 answers NoSuchUpload if the lost attempt had completed the upload
//      (or the retries run out). A HEAD of the key then settles it: its ETag
//      is the multipart ETag of exactly these parts (MultipartEtag: the hex
//      MD5 of the parts' binary MD5s, '-', the number of parts) only when
//      this upload was completed, and then the upload succeeded. Otherwise
//      (another ETag, no object, part ETags that are not MD5s) the error
//      stands.
//   4. If step 2 or 3 fails, DELETE <key>?uploadId=<id> aborts the upload,
//      so no object and no stored parts are left; the old value of the key,
//      if any, stays.
#include "cairn/kvstore/s3/s3_multipart.h"

#include <openssl/evp.h>

#include <string>
#include <vector>

#include "cairn/kvstore/s3/s3_xml.h"
#include "cairn/util/hex.h"

namespace cairn::s3 {

using http::HttpCall;
using http::HttpResponse;

namespace {

std::string_view Unquoted(std::string_view etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  return etag;
}

}  // namespace

std::optional<std::string> MultipartEtag(const std::vector<std::string>& part_etags) {
  if (part_etags.empty()) return std::nullopt;
  std::string digests;
  for (const std::string& quoted : part_etags) {
    std::string_view hex = Unquoted(quoted);
    if (hex.size() != 32) return std::nullopt;  // not an MD5 (e.g. encrypted with KMS)
    for (size_t i = 0; i < hex.size(); i += 2) {
      int hi = HexDigit(hex[i]), lo = HexDigit(hex[i + 1]);
      if (hi < 0 || lo < 0) return std::nullopt;
      digests += static_cast<char>(hi * 16 + lo);
    }
  }
  unsigned char md5[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(digests.data(), digests.size(), md5, &len, EVP_md5(), nullptr) != 1) {
    return std::nullopt;
  }
  return HexLower(md5, len) + "-" + std::to_string(part_etags.size());
}

S3MultipartUpload::S3MultipartUpload(const S3KvStore& store, std::string_view key,
                                     std::string_view what)
    : store_(store),
      object_(store.options().prefix + std::string(key)),
      op_("writing " + store.Describe(key) + " (" + std::string(what) + ")") {}

Status S3MultipartUpload::Start() {
  HttpCall start = store_.MakeCall("POST", object_, {{"uploads", ""}}, {}, {}, op_ + ": starting");
  CAIRN_ASSIGN_OR_RETURN(HttpResponse started, store_.Run(start));
  if (started.status != 200) return store_.Explain(http::HttpStatusError(start, started));
  std::optional<std::string> upload_id = XmlText(started.body.as_string_view(), "UploadId");
  if (!upload_id || upload_id->empty()) {
    return DataLossError(op_ + ": the response to starting the upload (POST " +
                         start.request.url + ") names no UploadId");
  }
  upload_id_ = *upload_id;
  return Status::OK();
}

HttpCall S3MultipartUpload::PartCall(int n, ByteView piece) const {
  return store_.MakeCall("PUT", object_, {{"partNumber", std::to_string(n)}, {"uploadId", upload_id_}},
                         {}, piece, op_ + ": part " + std::to_string(n));
}

Status S3MultipartUpload::RecordPart(int n, const HttpCall& call, Result<HttpResponse> response) {
  if (!response.ok()) return response.status();
  if (response->status != 200) return store_.Explain(http::HttpStatusError(call, *response));
  std::optional<std::string> etag = response->Header("etag");
  if (!etag) {
    return DataLossError(call.operation + " (PUT " + call.request.url + "): response without an ETag");
  }
  std::lock_guard<std::mutex> lock(mu_);
  if (etags_.size() < static_cast<size_t>(n)) etags_.resize(n);
  etags_[n - 1] = std::move(*etag);
  return Status::OK();
}

Status S3MultipartUpload::Complete(int parts) {
  std::string complete = "<CompleteMultipartUpload>";
  std::vector<std::string> etags;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < parts; ++i) {
      if (static_cast<size_t>(i) >= etags_.size() || etags_[i].empty()) {
        return InternalError(op_ + ": part " + std::to_string(i + 1) + " has no ETag");
      }
      complete += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" +
                  XmlEscape(etags_[i]) + "</ETag></Part>";
      etags.push_back(etags_[i]);
    }
  }
  complete += "</CompleteMultipartUpload>";
  HttpCall finish = store_.MakeCall("POST", object_, {{"uploadId", upload_id_}}, {},
                                    AsBytes(complete), op_ + ": completing");
  Result<HttpResponse> done = store_.Run(finish);
  Status failure;
  if (!done.ok()) {
    failure = done.status();
  } else if (done->status != 200 ||
             done->body.as_string_view().find("<Error>") != std::string_view::npos) {
    failure = store_.Explain(http::HttpStatusError(finish, *done));
  }
  bool lost = !done.ok() ? failure.code() == StatusCode::kUnavailable
                         : done->status == 404 &&
                               done->body.as_string_view().find("NoSuchUpload") != std::string_view::npos;
  if (!failure.ok() && !(lost && CompletedBefore(etags))) return failure;  // step 3b
  completed_ = true;
  return Status::OK();
}

bool S3MultipartUpload::CompletedBefore(const std::vector<std::string>& etags) const {
  std::optional<std::string> expected = MultipartEtag(etags);
  if (!expected) return false;
  HttpCall head = store_.MakeCall("HEAD", object_, {}, {}, {},
                                  op_ + ": reading the object's ETag after the completion's answer was lost");
  Result<HttpResponse> r = store_.Run(head);
  if (!r.ok() || r->status != 200) return false;
  std::optional<std::string> etag = r->Header("etag");
  return etag && Unquoted(*etag) == *expected;
}

void S3MultipartUpload::Abort() {
  if (!started() || completed_) return;
  HttpCall call = store_.MakeCall("DELETE", object_, {{"uploadId", upload_id_}}, {}, {}, op_ + ": aborting");
  store_.Run(std::move(call)).status().IgnoreError();
  completed_ = true;  // nothing left to abort
}

Status S3KvStore::PutMultipart(std::string_view key, ByteView value) {
  S3MultipartUpload upload(*this, key, "multipart upload");
  CAIRN_RETURN_IF_ERROR(upload.Start());  // step 1
  // Step 2.
  std::vector<HttpCall> parts;
  const uint64_t part_size = options_.part_size;
  for (uint64_t offset = 0; offset < value.size(); offset += part_size) {
    ByteView piece = value.subspan(offset, std::min<uint64_t>(part_size, value.size() - offset));
    parts.push_back(upload.PartCall(static_cast<int>(parts.size()) + 1, piece));
  }
  std::vector<HttpCall> described = parts;
  std::vector<Result<HttpResponse>> uploaded = options_.http->ExecuteAll(std::move(parts));
  for (size_t i = 0; i < uploaded.size(); ++i) {
    Status s = upload.RecordPart(static_cast<int>(i) + 1, described[i], std::move(uploaded[i]));
    if (!s.ok()) {
      upload.Abort();  // step 4
      return s;
    }
  }
  Status done = upload.Complete(static_cast<int>(described.size()));  // step 3
  if (!done.ok()) upload.Abort();  // step 4
  return done;
}

}  // namespace cairn::s3
