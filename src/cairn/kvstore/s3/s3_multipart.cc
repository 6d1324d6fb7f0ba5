// Multipart upload of one large value (S3KvStore::PutMultipart).
//
// Protocol:
//   1. POST <key>?uploads starts an upload; the response names its UploadId.
//   2. The value is cut into parts of `part_size` bytes (the last may be
//      shorter); every part is PUT concurrently as
//      <key>?partNumber=<n>&uploadId=<id> and its ETag kept.
//   3. POST <key>?uploadId=<id> with the list of (part number, ETag) makes
//      the object visible at once (S3 may answer 200 with an <Error> body,
//      which counts as a failure).
//   4. If step 2 or 3 fails, DELETE <key>?uploadId=<id> aborts the upload,
//      so no object and no stored parts are left; the old value of the key,
//      if any, stays.
#include <string>
#include <vector>

#include "cairn/kvstore/s3/s3_kvstore.h"
#include "cairn/kvstore/s3/s3_xml.h"

namespace cairn::s3 {

using http::HttpCall;
using http::HttpResponse;

Status S3KvStore::PutMultipart(std::string_view key, ByteView value) {
  const std::string object = options_.prefix + std::string(key);
  const std::string op = "writing " + Describe(key) + " (multipart upload)";
  // Step 1.
  HttpCall start = MakeCall("POST", object, {{"uploads", ""}}, {}, {}, op + ": starting");
  CAIRN_ASSIGN_OR_RETURN(HttpResponse started, Run(start));
  if (started.status != 200) return Explain(http::HttpStatusError(start, started));
  std::optional<std::string> upload_id = XmlText(started.body.as_string_view(), "UploadId");
  if (!upload_id || upload_id->empty()) {
    return DataLossError(op + ": the response to starting the upload names no UploadId");
  }
  auto abort = [&](Status why) {
    HttpCall call = MakeCall("DELETE", object, {{"uploadId", *upload_id}}, {}, {}, op + ": aborting");
    Run(std::move(call)).status().IgnoreError();
    return why;
  };
  // Step 2.
  std::vector<HttpCall> parts;
  const uint64_t part_size = options_.part_size;
  for (uint64_t offset = 0, n = 1; offset < value.size(); offset += part_size, ++n) {
    ByteView piece = value.subspan(offset, std::min<uint64_t>(part_size, value.size() - offset));
    parts.push_back(MakeCall("PUT", object,
                             {{"partNumber", std::to_string(n)}, {"uploadId", *upload_id}}, {},
                             piece, op + ": part " + std::to_string(n)));
  }
  std::vector<HttpCall> described = parts;
  std::vector<Result<HttpResponse>> uploaded = options_.http->ExecuteAll(std::move(parts));
  std::string complete = "<CompleteMultipartUpload>";
  for (size_t i = 0; i < uploaded.size(); ++i) {
    if (!uploaded[i].ok()) return abort(uploaded[i].status());
    if (uploaded[i]->status != 200) {
      return abort(Explain(http::HttpStatusError(described[i], *uploaded[i])));
    }
    std::optional<std::string> etag = uploaded[i]->Header("etag");
    if (!etag) return abort(DataLossError(described[i].operation + ": response without an ETag"));
    complete += "<Part><PartNumber>" + std::to_string(i + 1) + "</PartNumber><ETag>" +
                XmlEscape(*etag) + "</ETag></Part>";
  }
  complete += "</CompleteMultipartUpload>";
  // Step 3.
  HttpCall finish = MakeCall("POST", object, {{"uploadId", *upload_id}}, {}, AsBytes(complete),
                             op + ": completing");
  Result<HttpResponse> done = Run(finish);
  if (!done.ok()) return abort(done.status());
  if (done->status != 200 || done->body.as_string_view().find("<Error>") != std::string_view::npos) {
    return abort(Explain(http::HttpStatusError(finish, *done)));
  }
  return Status::OK();
}

}  // namespace cairn::s3
