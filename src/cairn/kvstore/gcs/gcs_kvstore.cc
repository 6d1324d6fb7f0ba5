#include "cairn/kvstore/gcs/gcs_kvstore.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <set>

#include "cairn/kvstore/child_entries.h"
#include "cairn/kvstore/http/environment.h"
#include "cairn/kvstore/http/object_batch.h"

namespace cairn::gcs {

using http::HttpCall;
using http::HttpResponse;
using http::EnvNumber;
using http::UriEncode;

bool ParseU64(std::string_view s, uint64_t* out) {
  if (s.empty() || s.size() > 19) return false;
  uint64_t n = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    n = n * 10 + static_cast<uint64_t>(c - '0');
  }
  *out = n;
  return true;
}

namespace {

// Buckets ("<endpoint> <bucket>") that a store of this process has seen
// exist. Each `cairn.save` opens store objects of its own; without this each
// one's first missing key (the manifest of a new OCDBT database) cost a
// request to check the bucket.
class SeenBuckets {
 public:
  static SeenBuckets& Get() {
    static SeenBuckets* seen = new SeenBuckets;  // never destroyed: used until exit
    return *seen;
  }
  bool Contains(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_.count(id) != 0;
  }
  void Add(const std::string& id) {
    std::lock_guard<std::mutex> lock(mu_);
    seen_.insert(id);
  }

 private:
  std::mutex mu_;
  std::set<std::string> seen_;
};

}  // namespace

void GcsKvStore::SawBucket() const {
  if (!bucket_seen_.exchange(true, std::memory_order_relaxed)) {
    SeenBuckets::Get().Add(options_.endpoint + " " + options_.bucket);
  }
}

Status ValidateGcsBucketName(std::string_view bucket) {
  bool ok = bucket.size() >= 3 && bucket.size() <= 222;
  for (char c : bucket) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_');
  }
  if (ok) return Status::OK();
  return InvalidArgumentError("invalid GCS bucket name `" + std::string(bucket.substr(0, 100)) +
                              "`: 3 to 222 characters of a-z, 0-9, '.', '-' and '_'");
}

Result<GcsOptions> GcsOptions::FromEnvironment(std::string bucket, std::string prefix) {
  GcsOptions o;
  o.bucket = std::move(bucket);
  o.prefix = std::move(prefix);
  CAIRN_RETURN_IF_ERROR(http::TlsTrustFromEnvironment().status());  // before any request
  std::string emulator = http::EnvString("STORAGE_EMULATOR_HOST");
  if (!emulator.empty()) {
    o.endpoint = emulator.find("://") == std::string::npos ? "http://" + emulator : emulator;
  }
  o.bearer_token = http::EnvString("CAIRN_GCS_BEARER_TOKEN");
  if (o.bearer_token.empty()) {
    CAIRN_ASSIGN_OR_RETURN(o.credentials, GcsCredentialsFromEnvironment(!emulator.empty()));
  }
  CAIRN_ASSIGN_OR_RETURN(o.retry, http::RetryPolicyFromEnvironment());
  o.user_project = http::EnvString("CAIRN_GCS_USER_PROJECT");
  CAIRN_ASSIGN_OR_RETURN(o.resumable_threshold,
                         EnvNumber("CAIRN_GCS_RESUMABLE_THRESHOLD", o.resumable_threshold));
  CAIRN_ASSIGN_OR_RETURN(o.upload_chunk_size, EnvNumber("CAIRN_GCS_CHUNK_SIZE", o.upload_chunk_size));
  CAIRN_ASSIGN_OR_RETURN(uint64_t page, EnvNumber("CAIRN_GCS_LIST_PAGE_SIZE", 1000));
  o.list_page_size = static_cast<int>(std::clamp<uint64_t>(page, 1, 1000));
  CAIRN_ASSIGN_OR_RETURN(o.max_list_pages, EnvNumber("CAIRN_LIST_MAX_PAGES", o.max_list_pages));
  return o;
}

Result<std::shared_ptr<GcsKvStore>> GcsKvStore::Open(GcsOptions o) {
  CAIRN_RETURN_IF_ERROR(ValidateGcsBucketName(o.bucket));
  if (!o.prefix.empty() && o.prefix.back() != '/') o.prefix += '/';
  while (!o.endpoint.empty() && o.endpoint.back() == '/') o.endpoint.pop_back();
  size_t scheme = o.endpoint.find("://");
  if (scheme == std::string::npos || o.endpoint.size() == scheme + 3 ||
      o.endpoint.find_first_of("/?#", scheme + 3) != std::string::npos) {
    return InvalidArgumentError("GCS endpoint `" + o.endpoint +
                                "` (STORAGE_EMULATOR_HOST): expected http(s)://host[:port]");
  }
  constexpr uint64_t kQuantum = 256 << 10;
  o.upload_chunk_size = std::max(kQuantum, o.upload_chunk_size / kQuantum * kQuantum);
  o.resumable_threshold = std::max<uint64_t>(o.resumable_threshold, 1);
  if (!o.http) o.http = http::HttpClient::Default();
  std::shared_ptr<GcsKvStore> store(new GcsKvStore(std::move(o)));
  store->url_ = "gs://" + store->options_.bucket + "/" + store->options_.prefix;
  return store;
}

HttpCall GcsKvStore::MakeCall(std::string method, std::string url, ByteView body,
                              std::vector<std::string> headers, std::string operation) const {
  HttpCall call;
  call.request.method = std::move(method);
  call.request.url = std::move(url);
  // Not on a resumable session's URI (`upload_id=`): the session was billed
  // when it was started.
  if (!options_.user_project.empty() && call.request.url.find("upload_id=") == std::string::npos) {
    call.request.url += (call.request.url.find('?') == std::string::npos ? "?" : "&") +
                        std::string("userProject=") + UriEncode(options_.user_project, /*keep_slash=*/false);
  }
  call.request.body = body;
  call.request.headers = std::move(headers);
  if (!options_.bearer_token.empty()) {
    call.request.headers.push_back("authorization: Bearer " + options_.bearer_token);
  }
  call.operation = std::move(operation);
  call.retry = options_.retry;
  // Answers to anything but a GET are short JSON documents.
  if (call.request.method != "GET") call.max_response_bytes = http::kMaxAnswerBytes;
  return call;
}

std::string GcsKvStore::ObjectUrl(std::string_view key) const {
  return options_.endpoint + "/storage/v1/b/" + options_.bucket + "/o/" +
         UriEncode(options_.prefix + std::string(key), /*keep_slash=*/false);
}

Result<HttpResponse> GcsKvStore::Run(HttpCall call) const {
  CAIRN_RETURN_IF_ERROR(AddGcsAuthorization(options_.credentials.get(), call));
  return options_.http->Execute(std::move(call));
}

Result<std::optional<uint64_t>> GcsKvStore::Size(std::string_view key) const {
  HttpCall call = MakeCall("GET", ObjectUrl(key) + "?fields=size", {}, {},
                           "reading the size of " + Describe(key));
  CAIRN_ASSIGN_OR_RETURN(HttpResponse r, Run(call));
  if (r.status == 404) return std::optional<uint64_t>();
  if (r.status != 200) return http::HttpStatusError(call, r);
  auto j = nlohmann::json::parse(r.body.as_string_view(), nullptr, /*allow_exceptions=*/false);
  uint64_t size = 0;
  if (!j.is_object() || !j.contains("size") || !j["size"].is_string() ||
      !ParseU64(j["size"].get<std::string>(), &size)) {
    return DataLossError(call.operation + ": malformed object metadata");
  }
  return std::optional<uint64_t>(size);
}

Status GcsKvStore::CheckBucketAfter404(const std::string& op) const {
  // An object that is missing, or a bucket that is: tell them apart, once
  // (a bucket seen to exist is not checked again).
  if (bucket_seen_.load(std::memory_order_relaxed)) return Status::OK();
  if (SeenBuckets::Get().Contains(options_.endpoint + " " + options_.bucket)) {
    bucket_seen_.store(true, std::memory_order_relaxed);
    return Status::OK();
  }
  HttpCall bucket = MakeCall("GET", options_.endpoint + "/storage/v1/b/" + options_.bucket, {}, {},
                             op + ": checking the bucket");
  CAIRN_ASSIGN_OR_RETURN(HttpResponse b, Run(bucket));
  if (b.status == 404) {
    return NotFoundError(op + ": the bucket `" + options_.bucket + "` does not exist");
  }
  if (b.status == 200) SawBucket();
  return Status::OK();
}

Result<bool> GcsKvStore::GetInto(std::string_view key, MutableByteView dst) {
  if (dst.empty()) return KvStore::GetInto(key, dst);
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate(url_));
  std::string op = "reading " + Describe(key);
  HttpCall call = MakeCall("GET", ObjectUrl(key) + "?alt=media", {}, {}, op);
  call.destination = dst;
  CAIRN_ASSIGN_OR_RETURN(HttpResponse r, Run(call));
  if (r.status == 404) {
    CAIRN_RETURN_IF_ERROR(CheckBucketAfter404(op));
    return false;
  }
  if (r.status != 200) return http::HttpStatusError(call, r);
  SawBucket();
  if (r.destination_bytes != dst.size()) {
    return DataLossError(op + ": the value has " + std::to_string(r.destination_bytes) +
                         " bytes, expected " + std::to_string(dst.size()));
  }
  return true;
}

Result<std::optional<Buffer>> GcsKvStore::Get(std::string_view key, const ByteRange& range) {
  return GetBounded(key, range, HttpCall().max_response_bytes);
}

Result<std::optional<Buffer>> GcsKvStore::GetAtMost(std::string_view key, uint64_t max_bytes) {
  return GetBounded(key, ByteRange{}, max_bytes);
}

Result<std::optional<Buffer>> GcsKvStore::GetBounded(std::string_view key, const ByteRange& range,
                                                     uint64_t max_bytes) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate(url_));
  std::string op = "reading " + Describe(key);
  auto from_size = [&]() -> Result<std::optional<Buffer>> {
    CAIRN_ASSIGN_OR_RETURN(std::optional<uint64_t> size, Size(key));
    if (!size) return std::optional<Buffer>();
    CAIRN_RETURN_IF_ERROR(ResolveByteRange(range, *size).status().Annotate(op));
    return std::optional<Buffer>(Buffer());
  };
  std::vector<std::string> headers;
  // What the read asks for bounds the body: a 206 has the range's length, a
  // 200 (the whole value) at most the range's end.
  uint64_t partial_bound = 0;
  if (!range.IsAll()) {
    uint64_t len = range.length.value_or(0);
    if (range.suffix) {
      if (len == 0) return from_size();
      headers.push_back("range: bytes=-" + std::to_string(len));
      partial_bound = len;
      max_bytes = std::min(max_bytes, len);
    } else if (range.length) {
      if (len == 0) return from_size();
      if (len > UINT64_MAX - range.offset) {
        return InvalidArgumentError(op + ": byte range " + range.ToString() + " overflows");
      }
      headers.push_back("range: bytes=" + std::to_string(range.offset) + "-" +
                        std::to_string(range.offset + len - 1));
      partial_bound = len;
      max_bytes = std::min(max_bytes, range.offset + len);
    } else {
      headers.push_back("range: bytes=" + std::to_string(range.offset) + "-");
    }
  }
  HttpCall call = MakeCall("GET", ObjectUrl(key) + "?alt=media", {}, headers, op);
  call.max_response_bytes = max_bytes;
  call.max_partial_response_bytes = partial_bound;
  CAIRN_ASSIGN_OR_RETURN(HttpResponse r, Run(call));
  if (r.status == 404) {
    CAIRN_RETURN_IF_ERROR(CheckBucketAfter404(op));
    return std::optional<Buffer>();
  }
  if (r.status == 200 || r.status == 206) SawBucket();
  if (r.status == 416) return from_size();
  if (r.status != 200 && r.status != 206) return http::HttpStatusError(call, r);
  if (range.IsAll()) return std::optional<Buffer>(std::move(r.body));
  // The total size: from Content-Range, else (a 200 with the whole value) the body.
  uint64_t total = r.body.size();
  uint64_t first = 0;
  if (r.status == 206) {
    std::string cr = r.Header("content-range").value_or("");
    size_t dash = cr.find('-');
    size_t slash = cr.find('/');
    if (cr.rfind("bytes ", 0) != 0 || dash == std::string::npos || slash == std::string::npos ||
        !ParseU64(std::string_view(cr).substr(6, dash - 6), &first) ||
        !ParseU64(std::string_view(cr).substr(slash + 1), &total)) {
      return DataLossError(op + ": malformed Content-Range `" + cr + "`");
    }
  }
  Result<std::pair<uint64_t, uint64_t>> span = ResolveByteRange(range, total);
  if (!span.ok()) return span.status().Annotate(op);
  if (r.status == 200) {
    return std::optional<Buffer>(
        Buffer::CopyOf(r.body.view().subspan(span->first, span->second - span->first)));
  }
  if (first != span->first || r.body.size() != span->second - span->first) {
    return DataLossError(op + ": the server returned other bytes than " + range.ToString());
  }
  return std::optional<Buffer>(std::move(r.body));
}

HttpCall GcsKvStore::MakeUploadCall(std::string_view key, ByteView value,
                                    std::optional<std::string> if_generation) const {
  const std::string object = UriEncode(options_.prefix + std::string(key), false);
  std::string base = options_.endpoint + "/upload/storage/v1/b/" + options_.bucket + "/o";
  if (!if_generation) {
    HttpCall call = MakeCall("POST", base + "?uploadType=media&name=" + object, value,
                             {"content-type: application/octet-stream"}, "writing " + Describe(key));
    return call;
  }
  // Conditional: a multipart upload (metadata and value in one request),
  // because emulators honour ifGenerationMatch only there.
  std::string boundary = "cairn_boundary_";
  for (uint32_t n = 0; std::search(value.begin(), value.end(), boundary.begin(), boundary.end()) !=
                       value.end(); ++n) {
    boundary = "cairn_boundary_" + std::to_string(n) + "_";
  }
  auto body = std::make_shared<std::string>();
  nlohmann::json meta = {{"name", options_.prefix + std::string(key)}};
  *body = "--" + boundary + "\r\ncontent-type: application/json; charset=UTF-8\r\n\r\n" +
          meta.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\r\n--" + boundary +
          "\r\ncontent-type: application/octet-stream\r\n\r\n";
  body->append(reinterpret_cast<const char*>(value.data()), value.size());
  *body += "\r\n--" + boundary + "--\r\n";
  HttpCall call = MakeCall("POST", base + "?uploadType=multipart&ifGenerationMatch=" + *if_generation,
                           AsBytes(*body), {"content-type: multipart/related; boundary=" + boundary},
                           "conditionally writing " + Describe(key) + " (ifGenerationMatch=" +
                               *if_generation + ")");
  call.keep_alive = body;
  call.idempotent = false;
  return call;
}

Result<bool> GcsKvStore::Upload(std::string_view key, ByteView value,
                                std::optional<std::string> if_generation) {
  if (!if_generation && value.size() >= options_.resumable_threshold) {
    return UploadResumable(key, value);
  }
  HttpCall call = MakeUploadCall(key, value, if_generation);
  Result<HttpResponse> response = Run(call);
  // A conditional upload that got no answer: settled by reading the object
  // back (gcs_conditional.cc, steps 1-3), and sent again while it has not
  // applied.
  int unanswered = 0;
  while (!response.ok()) {
    if (!if_generation) return response.status();
    RememberGeneration(std::string(key), {}, std::nullopt);
    CAIRN_ASSIGN_OR_RETURN(std::optional<bool> settled,
                           SettleUnansweredWrite(key, value, *if_generation, response.status()));
    if (settled) return *settled;
    if (++unanswered >= kMaxUnansweredUploads) return response.status();
    response = Run(call);
  }
  HttpResponse& r = *response;
  if (r.status == 200) {
    SawBucket();
    if (if_generation) {
      // The object resource of what was stored: its generation.
      auto j = nlohmann::json::parse(r.body.as_string_view(), nullptr, /*allow_exceptions=*/false);
      std::optional<std::string> generation;
      if (j.is_object() && j.contains("generation") && j["generation"].is_string()) {
        generation = j["generation"].get<std::string>();
      }
      RememberGeneration(std::string(key), value, generation);
    }
    return true;
  }
  if (if_generation && r.status == 412) {
    // After an unanswered attempt, the precondition may fail because that
    // attempt applied.
    if (unanswered > 0) return HoldsValue(key, value);
    return false;
  }
  if (r.status == 404) {
    return NotFoundError(call.operation + ": the bucket `" + options_.bucket + "` does not exist (" +
                         call.request.method + " " + call.request.url + ": HTTP 404)");
  }
  return http::HttpStatusError(call, r);
}

Status GcsKvStore::Put(std::string_view key, ByteView value) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate(url_));
  return Upload(key, value, std::nullopt).status();
}

Status GcsKvStore::Delete(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate(url_));
  HttpCall call = MakeCall("DELETE", ObjectUrl(key), {}, {}, "deleting " + Describe(key));
  CAIRN_ASSIGN_OR_RETURN(HttpResponse r, Run(call));
  if (r.status == 200 || r.status == 204 || r.status == 404) return Status::OK();
  return http::HttpStatusError(call, r);
}

Status GcsKvStore::ApplyBatch(std::vector<KvMutation> mutations) {
  http::ObjectBatchCalls calls;
  calls.large_value_bytes = options_.resumable_threshold;
  calls.make_put = [this](const std::string& key, ByteView value) {
    return MakeUploadCall(key, value, std::nullopt);
  };
  calls.make_delete = [this](const std::string& key) {
    return MakeCall("DELETE", ObjectUrl(key), {}, {}, "deleting " + Describe(key));
  };
  calls.put_large = [this](const std::string& key, ByteView value) {
    return UploadResumable(key, value).status();
  };
  calls.authorize = [this](http::HttpCall& call) {
    return AddGcsAuthorization(options_.credentials.get(), call);
  };
  return http::ApplyObjectBatch(*this, *options_.http, std::move(mutations), calls);
}

Status GcsKvStore::DeletePrefix(std::string_view prefix) { return http::DeleteObjectPrefix(*this, prefix); }

Status GcsKvStore::CreateBucket() {
  std::string body = nlohmann::json{{"name", options_.bucket}}.dump();
  HttpCall call = MakeCall("POST", options_.endpoint + "/storage/v1/b", AsBytes(body),
                           {"content-type: application/json"}, "creating the bucket of " + url_);
  CAIRN_ASSIGN_OR_RETURN(HttpResponse r, Run(call));
  if (r.status == 200 || r.status == 409) return Status::OK();
  return http::HttpStatusError(call, r);
}

}  // namespace cairn::gcs
