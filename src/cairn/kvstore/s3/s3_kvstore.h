// S3KvStore: keys as objects of an S3 bucket (or an S3-compatible server:
// MinIO, R2, moto), below a key prefix. URL: `s3://bucket/path/`, as
// TensorStore spells it; `s3://bucket/path/|ocdbt:` and `|zarr3:` work on it.
//
// Requests go through the shared HttpClient (http/http_client.h): many in
// flight, retried with backoff on 429, 5xx and transport errors when
// idempotent, signed with SigV4 (sigv4.h) unless the credentials are
// anonymous (aws_credentials.h). Temporary credentials are asked for per
// request and refreshed before they expire (aws_credential_provider.h).
//
// Operations:
//   Get            GET, with a Range header for byte ranges; 404 -> missing
//   GetInto        one GET whose body libcurl writes straight into the
//                  caller's memory (a restored chunk lands in the array
//                  without a buffer or a copy)
//   GetAtMost      a GET that stops receiving past the caller's limit
//                  (every GET is bounded: a range by its length)
//   GetMany        the GETs of up to 64 reads in flight at once
//   Put            one PUT, or a multipart upload for values of at least
//                  `multipart_threshold` bytes (parts uploaded concurrently;
//                  an upload that fails is aborted, so nothing is visible)
//   OpenWriter     as Put for a value below `multipart_threshold` (sent at
//                  Commit), else a multipart upload whose parts go up as
//                  they fill, a few at a time (s3_writer.h)
//   CompareAndPut  absent: PUT with `If-None-Match: *`; a value: GET with its
//                  ETag, compare, PUT with `If-Match: <etag>`. 412 -> false.
//                  Expecting the bytes this object last wrote there with a
//                  conditional PUT (an OCDBT manifest), the ETag that PUT
//                  returned is sent at once, without the GET (412: the value
//                  changed since, so the GET-compare-PUT above decides).
//                  Conditional PUTs are not retried after a transport error
//                  (the first may have landed).
//   List           ListObjectsV2 pages of up to 1000 keys, continued with the
//                  continuation token (s3_list.cc: whole pages only, a
//                  page cap, no repeated token)
//   ListChildren   the same with `delimiter=/`: keys directly below the
//                  prefix and one CommonPrefixes entry per deeper child
//   DeletePrefix   List, then every DELETE concurrently
//   ApplyBatch     every PUT and DELETE concurrently (keys validated first;
//                  in order when a key repeats)
//   prefix commit  the in-place default of kvstore.h: keys are written under
//                  their final names and the marker last (no rename exists)
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "cairn/kvstore/http/http_client.h"
#include "cairn/kvstore/http/listing_pages.h"
#include "cairn/kvstore/kvstore.h"
#include "cairn/kvstore/s3/aws_credential_provider.h"
#include "cairn/kvstore/s3/sigv4.h"

namespace cairn::s3 {

struct S3Options {
  std::string bucket;
  std::string prefix;  // "" or ending in '/'
  // "http(s)://host[:port]": an S3-compatible server, addressed path-style
  // (<endpoint>/<bucket>/<key>). Empty: AWS, virtual-hosted
  // (https://<bucket>.s3.<region>.amazonaws.com/<key>), or path-style
  // (https://s3.<region>.amazonaws.com/<bucket>/<key>) for a bucket name
  // with '.'.
  std::string endpoint;
  std::string region = "us-east-1";
  AwsCredentials credentials;  // anonymous: requests are not signed
  // Asked per request when set (refreshing temporary credentials);
  // otherwise `credentials`, which never expire.
  std::shared_ptr<AwsCredentialProvider> credential_provider;
  // Values below this go up in one PUT, as TensorStore sends every value: a
  // retry resends the value whole, and a lone large value gets one
  // connection's bandwidth (a save uploads many values at once anyway).
  // moto takes 1.7x as long for a 64 MiB multipart upload as for one PUT.
  uint64_t multipart_threshold = uint64_t{128} << 20;
  uint64_t part_size = uint64_t{16} << 20;  // >= 5 MiB (S3's minimum)
  int list_page_size = 1000;  // max-keys of ListObjectsV2 (1 to 1000)
  // Pages one listing may have (http/listing_pages.h).
  uint64_t max_list_pages = http::kDefaultMaxListPages;
  // Every request says `x-amz-request-payer: requester` (signed), which a
  // Requester Pays bucket requires of anyone but its owner (TensorStore's
  // `requester_pays`).
  bool requester_pays = false;
  http::RetryPolicy retry;
  std::shared_ptr<http::HttpClient> http;  // null: HttpClient::Default()

  // For `s3://bucket/prefix`: endpoint from AWS_ENDPOINT_URL_S3 or
  // AWS_ENDPOINT_URL, region as aws_region.h says (the environment, the
  // config file, else one HEAD of the bucket),
  // credentials as aws_credentials.h says, retry budget from
  // CAIRN_HTTP_MAX_ATTEMPTS and CAIRN_HTTP_INITIAL_BACKOFF_MS, upload sizes
  // from CAIRN_S3_MULTIPART_THRESHOLD and CAIRN_S3_PART_SIZE (bytes), the
  // listing page size from CAIRN_S3_LIST_PAGE_SIZE, the cap on a listing's
  // pages from CAIRN_LIST_MAX_PAGES, requester_pays from
  // CAIRN_S3_REQUESTER_PAYS (true/false, 1/0).
  static Result<S3Options> FromEnvironment(std::string bucket, std::string prefix);
};

// Checks a bucket name: 3 to 63 of a-z 0-9 . - _ (InvalidArgument otherwise).
Status ValidateBucketName(std::string_view bucket);

class S3KvStore : public KvStore {
 public:
  static Result<std::shared_ptr<S3KvStore>> Open(S3Options options);

  Result<std::optional<Buffer>> Get(std::string_view key, const ByteRange& range = {}) override;
  Result<bool> GetInto(std::string_view key, MutableByteView dst) override;
  // One GET whose body is not received past `max_bytes`.
  Result<std::optional<Buffer>> GetAtMost(std::string_view key, uint64_t max_bytes) override;
  // Every read in flight at once (in windows of 64).
  Status GetMany(const std::vector<KeyRead>& reads, const KeyReadFn& fn) override;
  Status Put(std::string_view key, ByteView value) override;
  Result<bool> PutIfAbsent(std::string_view key, ByteView value) override;
  Result<bool> CompareAndPut(std::string_view key, std::optional<ByteView> expected,
                             ByteView value) override;
  Status Delete(std::string_view key) override;
  Result<std::vector<KeyInfo>> List(std::string_view prefix = "") override;
  // One delimited listing (`delimiter=/`): a page per 1000 children, not
  // per 1000 keys below them.
  Result<std::vector<ChildEntry>> ListChildren(std::string_view prefix) override;
  Status ApplyBatch(std::vector<KvMutation> mutations) override;
  Status DeletePrefix(std::string_view prefix) override;
  // Streams the value up in parts as they fill (s3_writer.h).
  Result<std::unique_ptr<KvWriter>> OpenWriter(std::string_view key) override;
  std::string url() const override { return url_; }
  size_t io_concurrency() const override { return options_.http->options().max_in_flight; }

  // Creates the bucket (for tests and emulators): PUT /<bucket>.
  Status CreateBucket();

  const S3Options& options() const { return options_; }

 private:
  friend class S3MultipartUpload;  // s3_multipart.h: its requests

  explicit S3KvStore(S3Options options);

  // A signed call of `method` on object `object` (bucket-relative, "" for the
  // bucket itself) with query parameters (unencoded; sorted here).
  http::HttpCall MakeCall(std::string method, std::string_view object,
                          std::vector<std::pair<std::string, std::string>> query,
                          std::vector<std::pair<std::string, std::string>> headers, ByteView body,
                          std::string operation) const;
  http::HttpCall MakePutCall(std::string_view key, ByteView value) const;
  Result<http::HttpResponse> Run(http::HttpCall call) const;
  // The GET of a read; nullopt for an empty range (answered by GetFromSize).
  Result<std::optional<http::HttpCall>> MakeGetCall(std::string_view key,
                                                    const ByteRange& range) const;
  Result<std::optional<Buffer>> GetResult(std::string_view key, const ByteRange& range,
                                          const http::HttpCall& call,
                                          Result<http::HttpResponse> response);
  Result<std::optional<Buffer>> GetFromSize(std::string_view key, const ByteRange& range);
  // Size of `key`'s object (HEAD), or nullopt when missing.
  Result<std::optional<uint64_t>> Head(std::string_view key) const;
  // Every page of a ListObjectsV2 listing (see s3_kvstore.cc).
  Status ListPages(std::string_view prefix, bool delimited, const std::string& op,
                   const std::function<Status(std::string key, uint64_t size)>& on_key,
                   const std::function<void(std::string prefix)>& on_prefix);
  Status PutMultipart(std::string_view key, ByteView value);  // s3_multipart.cc
  // A PUT with a precondition header; false on 412. The ETag of what it
  // stored is remembered (KnownEtagFor).
  Result<bool> ConditionalPut(std::string_view key, ByteView value, std::string header);
  // After a conditional write failed without an answer (s3_conditional.cc,
  // steps 1-3): true when the key holds `value` (the write was applied),
  // nullopt when the key is still as `header` requires (send it again),
  // else `failure`.
  Result<std::optional<bool>> SettleUnansweredWrite(std::string_view key, ByteView value, std::string_view header,
                                                    Status failure);
  Result<std::pair<bool, http::HttpResponse>> ReadBack(std::string_view key, ByteView value);
  Result<bool> HoldsValue(std::string_view key, ByteView value);
  // Adds the credentials hint to a 401/403 error.
  Status Explain(Status s) const;

  // The ETag a conditional PUT of this object got back, and the SHA-256 of
  // the bytes it stored, by key (at most kMaxKnownEtags keys).
  struct KnownEtag {
    std::string sha256;
    std::string etag;
  };
  std::optional<std::string> KnownEtagFor(const std::string& key, ByteView expected);
  void RememberEtag(const std::string& key, ByteView value, std::optional<std::string> etag);

  S3Options options_;
  std::mutex etags_mu_;
  std::map<std::string, KnownEtag> etags_;  // guarded by etags_mu_
  std::string url_;
  std::string host_;         // the Host header value
  std::string base_url_;     // scheme://host[:port]
  std::string path_prefix_;  // "/<bucket>" path-style, "" virtual-hosted
};

}  // namespace cairn::s3
