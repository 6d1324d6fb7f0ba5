// Resumable uploads: the session's requests (GcsResumableSession,
// gcs_resumable.h) and GcsKvStore::UploadResumable, which sends a value held
// whole. The streamed writer (gcs_writer.cc) uses the same session.
//
// Protocol of UploadResumable:
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
#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <thread>

#include "cairn/kvstore/gcs/gcs_kvstore.h"
#include "cairn/kvstore/gcs/gcs_resumable.h"

namespace cairn::gcs {

using http::HttpCall;
using http::HttpResponse;

GcsResumableSession::GcsResumableSession(const GcsKvStore& store, std::string_view key,
                                         std::string_view what)
    : store_(store),
      object_(store.options().prefix + std::string(key)),
      op_("writing " + store.Describe(key) + " (" + std::string(what) + ")") {}

Status GcsResumableSession::Start(std::optional<uint64_t> length) {
  const GcsOptions& o = store_.options();
  std::string url = o.endpoint + "/upload/storage/v1/b/" + o.bucket +
                    "/o?uploadType=resumable&name=" + http::UriEncode(object_, false);
  std::vector<std::string> headers = {"x-upload-content-type: application/octet-stream"};
  if (length) headers.push_back("x-upload-content-length: " + std::to_string(*length));
  HttpCall start = store_.MakeCall("POST", url, {}, std::move(headers), op_ + ": starting");
  CAIRN_ASSIGN_OR_RETURN(HttpResponse started, store_.Run(start));
  if (started.status != 200 && started.status != 201) return http::HttpStatusError(start, started);
  std::optional<std::string> session = started.Header("location");
  if (!session || session->empty()) {
    return DataLossError(op_ + " (POST " + url + "): the server opened no upload session (no Location header)");
  }
  uri_ = *session;
  return Status::OK();
}

HttpCall GcsResumableSession::ChunkCall(uint64_t offset, ByteView data,
                                        std::optional<uint64_t> total) const {
  std::string range = data.empty() ? "*" : std::to_string(offset) + "-" +
                                               std::to_string(offset + data.size() - 1);
  std::string header = "content-range: bytes " + range + "/" + (total ? std::to_string(*total) : "*");
  HttpCall call = store_.MakeCall("PUT", uri_, data, {header}, op_ + ": bytes from " + std::to_string(offset));
  // A chunk libcurl resent by itself after it had reached GCS would be sent
  // twice without SendChunk knowing, where SendChunk resumes from the
  // offset the server says it kept.
  call.fresh_connection = true;
  return call;
}

Result<uint64_t> GcsResumableSession::Kept(const HttpResponse& r, uint64_t limit) const {
  // "bytes=0-<last kept>", or no header when nothing was kept.
  std::string kept = r.Header("range").value_or("");
  if (kept.empty()) return uint64_t{0};
  size_t dash = kept.find('-');
  char* end = nullptr;
  unsigned long long last =
      dash == std::string::npos ? 0 : std::strtoull(kept.c_str() + dash + 1, &end, 10);
  if (dash == std::string::npos || end == nullptr || *end != '\0' || last + 1 > limit) {
    return DataLossError(op_ + " (PUT " + uri_ + "): malformed Range `" + kept +
                         "` in a 308 answer (at most " + std::to_string(limit) + " bytes were sent)");
  }
  return static_cast<uint64_t>(last + 1);
}

Result<GcsResumableSession::QueryResult> GcsResumableSession::Query(std::optional<uint64_t> total,
                                                                    uint64_t limit) {
  HttpCall call = store_.MakeCall(
      "PUT", uri_, {}, {"content-range: bytes */" + (total ? std::to_string(*total) : "*")},
      op_ + ": asking how much the server kept");
  CAIRN_ASSIGN_OR_RETURN(HttpResponse r, store_.Run(call));
  if (r.status == 200 || r.status == 201) return QueryResult{true, limit};
  if (r.status != 308) return http::HttpStatusError(call, r);
  CAIRN_ASSIGN_OR_RETURN(uint64_t kept, Kept(r, limit));
  return QueryResult{false, kept};
}

Status GcsResumableSession::SendChunk(uint64_t offset, ByteView data, std::optional<uint64_t> total) {
  const uint64_t end = offset + data.size();
  const http::RetryPolicy& policy = store_.options().retry;
  std::chrono::milliseconds backoff = policy.initial_backoff;
  thread_local std::mt19937_64 rng{std::random_device{}()};
  uint64_t pos = offset;
  int failures = 0;
  auto lost = [&](uint64_t kept) {
    return DataLossError(op_ + " (PUT " + uri_ + "): the server says it kept " +
                         std::to_string(kept) + " bytes, but had kept " + std::to_string(pos) +
                         " and was sent " + std::to_string(end));
  };
  for (int rounds = 0;; ++rounds) {
    if (rounds > 100000) return DataLossError(op_ + ": the upload makes no progress");
    HttpCall call = ChunkCall(pos, data.subspan(pos - offset), total);
    call.retry.max_attempts = 1;  // resumed below from what the server kept
    Result<HttpResponse> r = store_.Run(call);
    Status failed;
    if (r.ok() && (r->status == 200 || r->status == 201)) {
      if (!total || end != *total) {
        return DataLossError(call.operation + " (PUT " + uri_ + "): the server finished the upload early");
      }
      finished_ = true;
      return Status::OK();
    }
    if (r.ok() && r->status == 308) {
      CAIRN_ASSIGN_OR_RETURN(uint64_t kept, Kept(*r, end));
      if (kept < pos) return lost(kept);
      if (kept == end) {
        if (!total) return Status::OK();
        return DataLossError(call.operation + " (PUT " + uri_ +
                             "): the server kept every byte but did not finish");
      }
      pos = kept;  // sent again from where the server stopped
      continue;
    }
    if (r.ok()) return http::HttpStatusError(call, *r);  // 4xx: not transient
    if (r.status().code() != StatusCode::kUnavailable) return r.status();
    failed = r.status();
    // A transport error or a 429/5xx: wait, ask what the server kept, resume.
    if (++failures >= policy.max_attempts) {
      return Status(failed.code(), std::string(failed.message()) + " (" + std::to_string(failures) +
                                       " tries of this chunk, each resumed from the session's offset)");
    }
    std::uniform_int_distribution<int64_t> jitter(backoff.count() / 2, backoff.count());
    std::this_thread::sleep_for(std::chrono::milliseconds(jitter(rng)));
    backoff = std::min(policy.max_backoff, backoff * 2);
    CAIRN_ASSIGN_OR_RETURN(QueryResult q, Query(total, end));
    if (q.finished) {
      if (!total || end != *total) {
        return DataLossError(op_ + " (PUT " + uri_ + "): the server finished the upload early");
      }
      finished_ = true;
      return Status::OK();
    }
    if (q.kept < offset) return lost(q.kept);
    pos = std::max(pos, q.kept);
    if (pos == end && !total) return Status::OK();
  }
}

void GcsResumableSession::Cancel() {
  if (!started() || finished_) return;
  store_.Run(store_.MakeCall("DELETE", uri_, {}, {}, op_ + ": cancelling")).status().IgnoreError();
  finished_ = true;  // nothing left to cancel
}

Result<bool> GcsKvStore::UploadResumable(std::string_view key, ByteView value) {
  GcsResumableSession session(*this, key, "resumable upload");
  CAIRN_RETURN_IF_ERROR(session.Start(value.size()));  // step 1
  const std::string& op = session.operation();
  auto cancel = [&](Status why) -> Result<bool> {
    session.Cancel();  // step 3
    return why;
  };
  // Step 2.
  const uint64_t total = value.size();
  uint64_t offset = 0;
  for (int rounds = 0;; ++rounds) {
    if (rounds > 100000) return cancel(DataLossError(op + ": the upload makes no progress"));
    uint64_t len = std::min<uint64_t>(options_.upload_chunk_size, total - offset);
    HttpCall chunk = session.ChunkCall(offset, value.subspan(offset, len), total);
    Result<HttpResponse> r = Run(chunk);
    if (!r.ok()) return cancel(r.status());
    if (r->status == 200 || r->status == 201) {
      if (offset + len != total) {
        return cancel(DataLossError(op + ": the server finished the upload early"));
      }
      return true;
    }
    if (r->status != 308) return cancel(http::HttpStatusError(chunk, *r));
    Result<uint64_t> next = session.Kept(*r, total);
    if (!next.ok()) return cancel(next.status());
    if (*next >= total) {
      return cancel(DataLossError(op + ": the server kept every byte but did not finish"));
    }
    offset = *next;
  }
}

}  // namespace cairn::gcs
