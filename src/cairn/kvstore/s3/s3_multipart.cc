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
//   4. If step 2 or 3 fails, DELETE <key>?uploadId=<id> aborts the upload,
//      so no object and no stored parts are left; the old value of the key,
//      if any, stays.
#include "cairn/kvstore/s3/s3_multipart.h"

#include <string>
#include <vector>

#include "cairn/kvstore/s3/s3_xml.h"

namespace cairn::s3 {

using http::HttpCall;
using http::HttpResponse;

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
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int i = 0; i < parts; ++i) {
      if (static_cast<size_t>(i) >= etags_.size() || etags_[i].empty()) {
        return InternalError(op_ + ": part " + std::to_string(i + 1) + " has no ETag");
      }
      complete += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" +
                  XmlEscape(etags_[i]) + "</ETag></Part>";
    }
  }
  complete += "</CompleteMultipartUpload>";
  HttpCall finish = store_.MakeCall("POST", object_, {{"uploadId", upload_id_}}, {},
                                    AsBytes(complete), op_ + ": completing");
  CAIRN_ASSIGN_OR_RETURN(HttpResponse done, store_.Run(finish));
  if (done.status != 200 || done.body.as_string_view().find("<Error>") != std::string_view::npos) {
    return store_.Explain(http::HttpStatusError(finish, done));
  }
  completed_ = true;
  return Status::OK();
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
