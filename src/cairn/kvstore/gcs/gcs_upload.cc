// Resumable upload of one large value (GcsKvStore::UploadResumable).
//
// Protocol:
//   1. POST .../o?uploadType=resumable&name=<object> with
//      X-Upload-Content-Length opens an upload session; its URI comes
//      back in the Location header.
//   2. The value goes to the session URI in chunks of `upload_chunk_size`
//      (a multiple of 256 KiB), each a PUT with Content-Range
//      `bytes <first>-<last>/<total>`. 308 answers "more": its Range header
//      says how much the server kept, and the next chunk starts there (so a
//      chunk cut short is sent again from where the server stopped). 200 or
//      201 answers the last chunk: the object is visible from then on.
//   3. On any failure the session is cancelled (DELETE on its URI), so no
//      object appears; the key keeps its old value.
// (Conditional writes do not come here: see CompareAndPut.)
#include <string>

#include "cairn/kvstore/gcs/gcs_kvstore.h"

namespace cairn::gcs {

using http::HttpCall;
using http::HttpResponse;

Result<bool> GcsKvStore::UploadResumable(std::string_view key, ByteView value) {
  const std::string op = "writing " + Describe(key) + " (resumable upload)";
  // Step 1.
  std::string url = options_.endpoint + "/upload/storage/v1/b/" + options_.bucket +
                    "/o?uploadType=resumable&name=" +
                    http::UriEncode(options_.prefix + std::string(key), false);
  HttpCall start = MakeCall("POST", url, {},
                            {"x-upload-content-length: " + std::to_string(value.size()),
                             "x-upload-content-type: application/octet-stream"},
                            op + ": starting");
  CAIRN_ASSIGN_OR_RETURN(HttpResponse started, Run(start));
  if (started.status != 200 && started.status != 201) return http::HttpStatusError(start, started);
  std::optional<std::string> session = started.Header("location");
  if (!session || session->empty()) {
    return DataLossError(op + ": the server opened no upload session (no Location header)");
  }
  auto cancel = [&](Status why) -> Result<bool> {
    Run(MakeCall("DELETE", *session, {}, {}, op + ": cancelling")).status().IgnoreError();
    return why;
  };
  // Step 2.
  const uint64_t total = value.size();
  uint64_t offset = 0;
  for (int rounds = 0;; ++rounds) {
    if (rounds > 100000) return cancel(DataLossError(op + ": the upload makes no progress"));
    uint64_t len = std::min<uint64_t>(options_.upload_chunk_size, total - offset);
    std::string range = "content-range: bytes " + std::to_string(offset) + "-" +
                        std::to_string(offset + len - 1) + "/" + std::to_string(total);
    HttpCall chunk = MakeCall("PUT", *session, value.subspan(offset, len), {range},
                              op + ": bytes from " + std::to_string(offset));
    Result<HttpResponse> r = Run(chunk);
    if (!r.ok()) return cancel(r.status());
    if (r->status == 200 || r->status == 201) {
      if (offset + len != total) {
        return cancel(DataLossError(op + ": the server finished the upload early"));
      }
      return true;
    }
    if (r->status != 308) return cancel(http::HttpStatusError(chunk, *r));
    // "bytes=0-<last kept>", or no header when nothing was kept.
    std::string kept = r->Header("range").value_or("");
    uint64_t next = 0;
    if (!kept.empty()) {
      size_t dash = kept.find('-');
      char* end = nullptr;
      unsigned long long last = dash == std::string::npos
                                    ? 0
                                    : std::strtoull(kept.c_str() + dash + 1, &end, 10);
      if (dash == std::string::npos || end == nullptr || *end != '\0' || last + 1 > total) {
        return cancel(DataLossError(op + ": malformed Range `" + kept + "` in a 308 answer"));
      }
      next = last + 1;
    }
    if (next >= total) {
      return cancel(DataLossError(op + ": the server kept every byte but did not finish"));
    }
    offset = next;
  }
}

}  // namespace cairn::gcs
