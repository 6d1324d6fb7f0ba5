#include "cairn/kvstore/s3/s3_kvstore.h"

#include <algorithm>
#include <cstdlib>
#include <set>

#include "cairn/kvstore/child_entries.h"
#include "cairn/kvstore/http/environment.h"
#include "cairn/kvstore/http/object_batch.h"

#include "cairn/kvstore/s3/aws_credentials.h"
#include "cairn/kvstore/s3/aws_region.h"
#include "cairn/kvstore/s3/s3_xml.h"

namespace cairn::s3 {

using http::HttpCall;
using http::HttpResponse;
using http::EnvNumber;
using http::UriEncode;

namespace {

// Parses "bytes <first>-<last>/<total>".
bool ParseContentRange(std::string_view s, uint64_t* first, uint64_t* last, uint64_t* total) {
  if (s.substr(0, 6) != "bytes ") return false;
  s.remove_prefix(6);
  auto number = [&](char stop, uint64_t* out) {
    size_t i = 0;
    uint64_t n = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') {
      if (n > (UINT64_MAX - 9) / 10) return false;
      n = n * 10 + static_cast<uint64_t>(s[i] - '0');
      ++i;
    }
    if (i == 0 || (stop != 0 && (i >= s.size() || s[i] != stop))) return false;
    if (stop == 0 && i != s.size()) return false;
    s.remove_prefix(stop != 0 ? i + 1 : i);
    *out = n;
    return true;
  };
  return number('-', first) && number('/', last) && number(0, total) && *first <= *last &&
         *last < *total;
}

}  // namespace

Status ValidateBucketName(std::string_view bucket) {
  bool ok = bucket.size() >= 3 && bucket.size() <= 63;
  for (char c : bucket) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '-' || c == '_');
  }
  if (ok) return Status::OK();
  return InvalidArgumentError("invalid S3 bucket name `" + std::string(bucket.substr(0, 100)) +
                              "`: 3 to 63 characters of a-z, 0-9, '.', '-' and '_'");
}

Result<S3Options> S3Options::FromEnvironment(std::string bucket, std::string prefix) {
  S3Options o;
  o.bucket = std::move(bucket);
  o.prefix = std::move(prefix);
  CAIRN_RETURN_IF_ERROR(http::TlsTrustFromEnvironment().status());  // before any request
  o.endpoint = http::EnvString("AWS_ENDPOINT_URL_S3");
  if (o.endpoint.empty()) o.endpoint = http::EnvString("AWS_ENDPOINT_URL");
  CAIRN_ASSIGN_OR_RETURN(o.retry, http::RetryPolicyFromEnvironment());
  CAIRN_ASSIGN_OR_RETURN(std::string region, ConfiguredAwsRegion());
  if (region.empty()) {
    CAIRN_RETURN_IF_ERROR(ValidateBucketName(o.bucket));
    std::string endpoint = o.endpoint;
    while (!endpoint.empty() && endpoint.back() == '/') endpoint.pop_back();
    CAIRN_ASSIGN_OR_RETURN(region, DiscoverBucketRegion(*http::HttpClient::Default(), o.retry,
                                                        endpoint, o.bucket));
  }
  o.region = region;
  CAIRN_ASSIGN_OR_RETURN(o.credential_provider,
                         AwsCredentialProviderFromEnvironment(!o.endpoint.empty(), region));
  CAIRN_ASSIGN_OR_RETURN(o.multipart_threshold,
                         EnvNumber("CAIRN_S3_MULTIPART_THRESHOLD", o.multipart_threshold));
  CAIRN_ASSIGN_OR_RETURN(o.part_size, EnvNumber("CAIRN_S3_PART_SIZE", o.part_size));
  CAIRN_ASSIGN_OR_RETURN(uint64_t page, EnvNumber("CAIRN_S3_LIST_PAGE_SIZE", 1000));
  o.list_page_size = static_cast<int>(std::clamp<uint64_t>(page, 1, 1000));
  CAIRN_ASSIGN_OR_RETURN(o.max_list_pages, EnvNumber("CAIRN_LIST_MAX_PAGES", o.max_list_pages));
  CAIRN_ASSIGN_OR_RETURN(o.requester_pays, http::EnvBool("CAIRN_S3_REQUESTER_PAYS", false));
  return o;
}

S3KvStore::S3KvStore(S3Options options) : options_(std::move(options)) {}

Result<std::shared_ptr<S3KvStore>> S3KvStore::Open(S3Options options) {
  CAIRN_RETURN_IF_ERROR(ValidateBucketName(options.bucket));
  if (!options.prefix.empty() && options.prefix.back() != '/') options.prefix += '/';
  if (options.part_size < (uint64_t{5} << 20)) options.part_size = uint64_t{5} << 20;
  if (options.multipart_threshold < options.part_size) options.multipart_threshold = options.part_size;
  if (!options.http) options.http = http::HttpClient::Default();
  if (!options.credential_provider) {
    options.credential_provider = AwsCredentialProvider::Fixed(options.credentials);
  }
  std::shared_ptr<S3KvStore> store(new S3KvStore(std::move(options)));
  S3Options& o = store->options_;
  store->url_ = "s3://" + o.bucket + "/" + o.prefix;
  if (o.endpoint.empty() && o.bucket.find('.') != std::string::npos) {
    // A name with '.' does not match the virtual hosts' TLS certificate
    // (*.s3.<region>.amazonaws.com): path-style addressing, as TensorStore.
    store->host_ = "s3." + o.region + ".amazonaws.com";
    store->base_url_ = "https://" + store->host_;
    store->path_prefix_ = "/" + o.bucket;
  } else if (o.endpoint.empty()) {
    store->host_ = o.bucket + ".s3." + o.region + ".amazonaws.com";
    store->base_url_ = "https://" + store->host_;
  } else {
    std::string_view ep = o.endpoint;
    while (!ep.empty() && ep.back() == '/') ep.remove_suffix(1);
    size_t scheme = ep.find("://");
    if (scheme == std::string_view::npos ||
        (ep.substr(0, scheme) != "http" && ep.substr(0, scheme) != "https") ||
        ep.find_first_of("/?#", scheme + 3) != std::string_view::npos || ep.size() == scheme + 3) {
      return InvalidArgumentError("S3 endpoint `" + o.endpoint +
                                  "` (AWS_ENDPOINT_URL): expected http(s)://host[:port]");
    }
    store->host_ = std::string(ep.substr(scheme + 3));
    store->base_url_ = std::string(ep);
    store->path_prefix_ = "/" + o.bucket;
  }
  return store;
}

HttpCall S3KvStore::MakeCall(std::string method, std::string_view object,
                             std::vector<std::pair<std::string, std::string>> query,
                             std::vector<std::pair<std::string, std::string>> headers,
                             ByteView body, std::string operation) const {
  std::string path = path_prefix_ + "/" + UriEncode(object, /*keep_slash=*/true);
  if (options_.requester_pays) headers.emplace_back("x-amz-request-payer", "requester");
  std::vector<std::pair<std::string, std::string>> encoded;
  for (auto& [k, v] : query) encoded.emplace_back(UriEncode(k, false), UriEncode(v, false));
  std::sort(encoded.begin(), encoded.end());
  std::string qs;
  for (auto& [k, v] : encoded) qs += (qs.empty() ? "" : "&") + k + "=" + v;
  HttpCall call;
  call.request.method = method;
  call.request.url = base_url_ + path + (qs.empty() ? "" : "?" + qs);
  call.request.body = body;
  call.operation = std::move(operation);
  call.retry = options_.retry;
  // Answers to anything but a GET are short XML documents.
  if (method != "GET") call.max_response_bytes = http::kMaxAnswerBytes;
  std::string payload_hash = body.empty() ? std::string(kEmptySha256) : Sha256Hex(body);
  // Fetched (when due) here, on the caller's thread; `prepare` runs on the
  // client's thread and only reads the provider's cache, so that a retry
  // signs with credentials another call refreshed meanwhile.
  Result<AwsCredentials> fetched = options_.credential_provider->Get();
  Status credentials_error;  // the client adds the operation and the URL
  if (!fetched.ok()) credentials_error = fetched.status();
  call.prepare = [this, method = std::move(method), path = std::move(path), qs = std::move(qs),
                  headers = std::move(headers), payload_hash = std::move(payload_hash),
                  credentials_error](http::HttpRequest& r) {
    if (!credentials_error.ok()) return credentials_error;
    SigV4Input in;
    in.method = method;
    in.canonical_uri = path;
    in.canonical_query = qs;
    in.headers = headers;
    in.headers.emplace_back("host", host_);
    in.amz_date = AmzDateNow();
    in.headers.emplace_back("x-amz-date", in.amz_date);
    in.headers.emplace_back("x-amz-content-sha256", payload_hash);
    std::optional<AwsCredentials> current = options_.credential_provider->Current();
    if (!current) return FailedPreconditionError("no AWS credentials");  // Get() succeeded: unreachable
    const AwsCredentials& c = *current;
    if (!c.session_token.empty()) in.headers.emplace_back("x-amz-security-token", c.session_token);
    in.payload_sha256 = payload_hash;
    in.region = options_.region;
    for (const auto& [name, value] : in.headers) r.headers.push_back(name + ": " + value);
    if (!c.anonymous()) {
      r.headers.push_back("authorization: " + SigV4Authorization(c, in));
    }
    return Status::OK();
  };
  return call;
}

Status S3KvStore::Explain(Status s) const {
  if (s.code() == StatusCode::kFailedPrecondition && options_.credential_provider->anonymous() &&
      (s.message().find("HTTP 403") != std::string_view::npos ||
       s.message().find("HTTP 401") != std::string_view::npos)) {
    return Status(s.code(), std::string(s.message()) +
                                " (no AWS credentials were found: set AWS_ACCESS_KEY_ID and "
                                "AWS_SECRET_ACCESS_KEY, use ~/.aws/credentials, web identity, the container "
                                "endpoint or EC2 instance metadata)");
  }
  return s;
}

Result<HttpResponse> S3KvStore::Run(HttpCall call) const {
  return options_.http->Execute(std::move(call));
}

Result<std::optional<uint64_t>> S3KvStore::Head(std::string_view key) const {
  std::string op = "reading the size of " + Describe(key);
  HttpCall call = MakeCall("HEAD", options_.prefix + std::string(key), {}, {}, {}, op);
  CAIRN_ASSIGN_OR_RETURN(HttpResponse r, Run(call));
  if (r.status == 404) return std::optional<uint64_t>();
  if (r.status != 200) return Explain(http::HttpStatusError(call, r));
  std::optional<std::string> len = r.Header("content-length");
  std::optional<uint64_t> n = len ? http::ParseContentLength(*len) : std::nullopt;
  if (!n) {
    return DataLossError(op + " (HEAD " + call.request.url + "): HEAD response without a valid Content-Length (`" +
                         len.value_or("<none>").substr(0, 40) + "`)");
  }
  return n;
}

Result<std::optional<Buffer>> S3KvStore::GetFromSize(std::string_view key, const ByteRange& range) {
  // Empty ranges have no HTTP form: resolve them against the size.
  CAIRN_ASSIGN_OR_RETURN(std::optional<uint64_t> size, Head(key));
  if (!size) return std::optional<Buffer>();
  CAIRN_RETURN_IF_ERROR(ResolveByteRange(range, *size).status().Annotate("reading " + Describe(key)));
  return std::optional<Buffer>(Buffer());
}

Result<std::optional<HttpCall>> S3KvStore::MakeGetCall(std::string_view key,
                                                       const ByteRange& range) const {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate(url_));
  std::vector<std::pair<std::string, std::string>> headers;
  // What the read asks for bounds the body: a 206 has the range's length, a
  // 200 (the whole value, from a server that ignored the Range) at most the
  // range's end.
  uint64_t partial_bound = 0, whole_bound = 0;
  if (!range.IsAll()) {
    uint64_t len = range.length.value_or(0);
    if (range.suffix) {
      if (len == 0) return std::optional<HttpCall>();
      headers.emplace_back("range", "bytes=-" + std::to_string(len));
      partial_bound = whole_bound = len;
    } else if (range.length) {
      if (len == 0) return std::optional<HttpCall>();
      if (len > UINT64_MAX - range.offset) {
        return InvalidArgumentError("reading " + Describe(key) + ": byte range " +
                                    range.ToString() + " overflows");
      }
      headers.emplace_back("range", "bytes=" + std::to_string(range.offset) + "-" +
                                        std::to_string(range.offset + len - 1));
      partial_bound = len;
      whole_bound = range.offset + len;
    } else {
      headers.emplace_back("range", "bytes=" + std::to_string(range.offset) + "-");
    }
  }
  HttpCall call = MakeCall("GET", options_.prefix + std::string(key), {}, headers, {}, "reading " + Describe(key));
  if (partial_bound != 0) call.max_partial_response_bytes = partial_bound;
  if (whole_bound != 0) call.max_response_bytes = std::min(call.max_response_bytes, whole_bound);
  return std::optional<HttpCall>(std::move(call));
}

Result<std::optional<Buffer>> S3KvStore::Get(std::string_view key, const ByteRange& range) {
  CAIRN_ASSIGN_OR_RETURN(std::optional<HttpCall> call, MakeGetCall(key, range));
  if (!call) return GetFromSize(key, range);
  Result<HttpResponse> r = Run(*call);
  return GetResult(key, range, *call, std::move(r));
}

Result<std::optional<Buffer>> S3KvStore::GetAtMost(std::string_view key, uint64_t max_bytes) {
  CAIRN_ASSIGN_OR_RETURN(std::optional<HttpCall> call, MakeGetCall(key, ByteRange{}));
  call->max_response_bytes = max_bytes;
  Result<HttpResponse> r = Run(*call);
  return GetResult(key, ByteRange{}, *call, std::move(r));
}

Result<bool> S3KvStore::GetInto(std::string_view key, MutableByteView dst) {
  if (dst.empty()) return KvStore::GetInto(key, dst);
  CAIRN_ASSIGN_OR_RETURN(std::optional<HttpCall> call, MakeGetCall(key, ByteRange{}));
  call->destination = dst;
  CAIRN_ASSIGN_OR_RETURN(HttpResponse r, Run(*call));
  if (r.status == 200) {
    if (r.destination_bytes != dst.size()) {
      return DataLossError(call->operation + ": the value has " +
                           std::to_string(r.destination_bytes) + " bytes, expected " +
                           std::to_string(dst.size()));
    }
    return true;
  }
  if (r.status == 404) {
    if (r.body.as_string_view().find("NoSuchBucket") != std::string_view::npos) {
      return NotFoundError(call->operation + ": the bucket `" + options_.bucket + "` does not exist");
    }
    return false;
  }
  return Explain(http::HttpStatusError(*call, r));
}

Status S3KvStore::GetMany(const std::vector<KeyRead>& reads, const KeyReadFn& fn) {
  // Windows of reads in flight together; each window's answers are handed
  // to `fn` before the next starts, which bounds the memory held.
  constexpr size_t kWindow = 64;
  for (size_t start = 0; start < reads.size(); start += kWindow) {
    size_t end = std::min(reads.size(), start + kWindow);
    std::vector<HttpCall> calls;
    std::vector<size_t> index;  // reads[index[j]] is calls[j]
    for (size_t i = start; i < end; ++i) {
      CAIRN_ASSIGN_OR_RETURN(std::optional<HttpCall> call, MakeGetCall(reads[i].key, reads[i].range));
      if (call && reads[i].max_bytes != 0 && reads[i].range.IsAll()) {
        call->max_response_bytes = std::min(call->max_response_bytes, reads[i].max_bytes);
      }
      if (call) {
        calls.push_back(std::move(*call));
        index.push_back(i);
      }
    }
    std::vector<HttpCall> described = calls;
    std::vector<Result<HttpResponse>> responses = options_.http->ExecuteAll(std::move(calls));
    size_t j = 0;
    for (size_t i = start; i < end; ++i) {
      Result<std::optional<Buffer>> value =
          j < index.size() && index[j] == i
              ? GetResult(reads[i].key, reads[i].range, described[j], std::move(responses[j]))
              : GetFromSize(reads[i].key, reads[i].range);
      if (j < index.size() && index[j] == i) ++j;
      if (!value.ok()) return value.status();
      CAIRN_RETURN_IF_ERROR(*value ? fn(i, (*value)->view()) : fn(i, std::nullopt));
    }
  }
  return Status::OK();
}

Result<std::optional<Buffer>> S3KvStore::GetResult(std::string_view key, const ByteRange& range,
                                                   const HttpCall& call,
                                                   Result<HttpResponse> response) {
  if (!response.ok()) return response.status();
  HttpResponse& r = *response;
  const std::string& op = call.operation;
  if (r.status == 404) {
    if (r.body.as_string_view().find("NoSuchBucket") != std::string_view::npos) {
      return NotFoundError(op + ": the bucket `" + options_.bucket + "` does not exist");
    }
    return std::optional<Buffer>();
  }
  if (r.status == 416) return GetFromSize(key, range);
  if (r.status == 200) {
    if (range.IsAll()) return std::optional<Buffer>(std::move(r.body));
    // A server that ignored the Range header: cut the range out.
    Result<std::pair<uint64_t, uint64_t>> span = ResolveByteRange(range, r.body.size());
    if (!span.ok()) return span.status().Annotate(op);
    return std::optional<Buffer>(
        Buffer::CopyOf(r.body.view().subspan(span->first, span->second - span->first)));
  }
  if (r.status != 206) return Explain(http::HttpStatusError(call, r));
  uint64_t first = 0, last = 0, total = 0;
  std::optional<std::string> cr = r.Header("content-range");
  if (!cr || !ParseContentRange(*cr, &first, &last, &total) || r.body.size() != last - first + 1) {
    return DataLossError(op + ": malformed ranged response (Content-Range `" +
                         cr.value_or("<none>") + "`, " + std::to_string(r.body.size()) + " bytes)");
  }
  // The server clips ranges that run past the end; the KvStore contract does not.
  Result<std::pair<uint64_t, uint64_t>> resolved = ResolveByteRange(range, total);
  if (!resolved.ok()) return resolved.status().Annotate(op);
  auto span = *resolved;
  if (span.first != first || span.second != last + 1) {
    return DataLossError(op + ": the server returned bytes [" + std::to_string(first) + ", " +
                         std::to_string(last + 1) + ") for " + range.ToString());
  }
  return std::optional<Buffer>(std::move(r.body));
}

HttpCall S3KvStore::MakePutCall(std::string_view key, ByteView value) const {
  return MakeCall("PUT", options_.prefix + std::string(key), {}, {}, value,
                  "writing " + Describe(key));
}

Status S3KvStore::Put(std::string_view key, ByteView value) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate(url_));
  if (value.size() >= options_.multipart_threshold) return PutMultipart(key, value);
  HttpCall call = MakePutCall(key, value);
  CAIRN_ASSIGN_OR_RETURN(HttpResponse r, Run(call));
  if (r.status != 200) return Explain(http::HttpStatusError(call, r));
  return Status::OK();
}

Status S3KvStore::Delete(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate(url_));
  HttpCall call = MakeCall("DELETE", options_.prefix + std::string(key), {}, {}, {},
                           "deleting " + Describe(key));
  CAIRN_ASSIGN_OR_RETURN(HttpResponse r, Run(call));
  if (r.status == 200 || r.status == 204 || r.status == 404) return Status::OK();
  return Explain(http::HttpStatusError(call, r));
}

Status S3KvStore::ApplyBatch(std::vector<KvMutation> mutations) {
  http::ObjectBatchCalls calls;
  calls.large_value_bytes = options_.multipart_threshold;
  calls.make_put = [this](const std::string& key, ByteView value) { return MakePutCall(key, value); };
  calls.make_delete = [this](const std::string& key) {
    return MakeCall("DELETE", options_.prefix + key, {}, {}, {}, "deleting " + Describe(key));
  };
  calls.put_large = [this](const std::string& key, ByteView value) { return PutMultipart(key, value); };
  calls.explain = [this](Status s) { return Explain(std::move(s)); };
  return http::ApplyObjectBatch(*this, *options_.http, std::move(mutations), calls);
}

Status S3KvStore::DeletePrefix(std::string_view prefix) { return http::DeleteObjectPrefix(*this, prefix); }

Status S3KvStore::CreateBucket() {
  HttpCall call = MakeCall("PUT", "", {}, {}, {}, "creating the bucket of " + url_);
  CAIRN_ASSIGN_OR_RETURN(HttpResponse r, Run(call));
  if (r.status == 200) return Status::OK();
  return Explain(http::HttpStatusError(call, r));
}

}  // namespace cairn::s3
