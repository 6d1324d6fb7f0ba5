// GcsKvStore: keys as objects of a Google Cloud Storage bucket below a key
// prefix, over the JSON API. URL: `gs://bucket/path/`, as TensorStore spells
// it; `|ocdbt:` and `|zarr3:` pipelines work on it.
//
// Requests go through the shared HttpClient (http/http_client.h): many in
// flight, retried with backoff on 429, 5xx and transport errors when
// idempotent. Credentials: an access token given in `GcsOptions::bearer_token`
// (CAIRN_GCS_BEARER_TOKEN), else `GcsOptions::credentials`, found in the
// environment as TensorStore does (gcs_credentials.h: service-account or
// authorized-user JSON, the metadata server, else anonymous).
//
// Operations:
//   Get            GET .../o/<object>?alt=media, a Range header for ranges
//   List           objects.list pages (gcs_list.cc: whole JSON only, a page
//                  cap, no repeated token)
//   GetInto        that GET with the body written straight into the caller's
//                  memory (a restored chunk lands in the array, no copy)
//   GetAtMost      that GET, received only up to the caller's limit (every
//                  GET is bounded: a range by its length)
//   Put            uploadType=media in one POST, or a resumable upload in
//                  chunks of `upload_chunk_size` for values of at least
//                  `resumable_threshold` bytes (gcs_upload.cc)
//   OpenWriter     as Put for a value below `resumable_threshold` (sent at
//                  Commit), else a resumable upload whose chunks go up as
//                  they fill, one at a time while the next fills (gcs_writer.h)
//   CompareAndPut  absent: ifGenerationMatch=0; a value: read it with its
//                  generation (x-goog-generation), compare, upload with
//                  ifGenerationMatch=<generation>. 412 -> false. Sent as
//                  one uploadType=multipart request whatever the size
//                  (fake-gcs-server honours preconditions only there); not
//                  retried after a transport error.
//                  Expecting the bytes this object last wrote there with a
//                  conditional upload (an OCDBT manifest), the generation
//                  that upload created is used at once, without the read
//                  (412: the value changed since; then read and compare).
//   List           objects.list pages (pageToken), names and sizes only
//   ListChildren   the same with `delimiter=/`: objects directly below the
//                  prefix and one `prefixes` entry per deeper child
//   DeletePrefix, ApplyBatch: every request concurrently
//   prefix commit  the in-place default of kvstore.h (marker written last)
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "cairn/kvstore/gcs/gcs_credentials.h"
#include "cairn/kvstore/http/http_client.h"
#include "cairn/kvstore/http/listing_pages.h"
#include "cairn/kvstore/kvstore.h"

namespace cairn::gcs {

// A decimal uint64 of at most 19 digits (sizes and generations in GCS's
// answers); false for anything else.
bool ParseU64(std::string_view s, uint64_t* out);

struct GcsOptions {
  std::string bucket;
  std::string prefix;  // "" or ending in '/'
  // "http(s)://host[:port]"; default https://storage.googleapis.com.
  std::string endpoint = "https://storage.googleapis.com";
  std::string bearer_token;  // empty: `credentials`
  std::shared_ptr<GcsCredentials> credentials;  // null: anonymous
  // Values below this go up in one request, as TensorStore sends every
  // value (a retry resends the value whole); fake-gcs-server takes 3x as
  // long for a 64 MiB resumable upload as for one media upload.
  uint64_t resumable_threshold = uint64_t{128} << 20;
  uint64_t upload_chunk_size = uint64_t{16} << 20;  // a multiple of 256 KiB
  int list_page_size = 1000;  // maxResults of objects.list (1 to 1000)
  // Pages one listing may have (http/listing_pages.h).
  uint64_t max_list_pages = http::kDefaultMaxListPages;
  // When set, every request names this project to bill (`userProject=`),
  // which a Requester Pays bucket requires (TensorStore's
  // `gcs_user_project`).
  std::string user_project;
  http::RetryPolicy retry;
  std::shared_ptr<http::HttpClient> http;  // null: HttpClient::Default()

  // For `gs://bucket/prefix`: endpoint from STORAGE_EMULATOR_HOST ("host:port"
  // or a URL), token from CAIRN_GCS_BEARER_TOKEN, else credentials from
  // GcsCredentialsFromEnvironment (gcs_credentials.h), retry budget from
  // CAIRN_HTTP_MAX_ATTEMPTS / CAIRN_HTTP_INITIAL_BACKOFF_MS, upload sizes
  // from CAIRN_GCS_RESUMABLE_THRESHOLD / CAIRN_GCS_CHUNK_SIZE, the listing
  // page size from CAIRN_GCS_LIST_PAGE_SIZE, the cap on a listing's pages
  // from CAIRN_LIST_MAX_PAGES, the project to bill from
  // CAIRN_GCS_USER_PROJECT.
  static Result<GcsOptions> FromEnvironment(std::string bucket, std::string prefix);
};

// 3 to 222 characters of a-z 0-9 . - _ (InvalidArgument otherwise).
Status ValidateGcsBucketName(std::string_view bucket);

class GcsKvStore : public KvStore {
 public:
  static Result<std::shared_ptr<GcsKvStore>> Open(GcsOptions options);

  Result<std::optional<Buffer>> Get(std::string_view key, const ByteRange& range = {}) override;
  // One GET whose body libcurl writes straight into `dst` (no buffer, no copy).
  Result<bool> GetInto(std::string_view key, MutableByteView dst) override;
  // One GET whose body is not received past `max_bytes`.
  Result<std::optional<Buffer>> GetAtMost(std::string_view key, uint64_t max_bytes) override;
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
  // Streams the value up in chunks as they fill (gcs_writer.h).
  Result<std::unique_ptr<KvWriter>> OpenWriter(std::string_view key) override;
  std::string url() const override { return url_; }
  size_t io_concurrency() const override { return options_.http->options().max_in_flight; }

  // Creates the bucket (for tests and emulators).
  Status CreateBucket();
  const GcsOptions& options() const { return options_; }

 private:
  friend class GcsResumableSession;  // gcs_resumable.h: its requests

  explicit GcsKvStore(GcsOptions options) : options_(std::move(options)) {}

  http::HttpCall MakeCall(std::string method, std::string url, ByteView body,
                          std::vector<std::string> headers, std::string operation) const;
  std::string ObjectUrl(std::string_view key) const;  // .../o/<encoded object>
  // Get, with a whole value received only up to `max_bytes` (a range: up to
  // its length).
  Result<std::optional<Buffer>> GetBounded(std::string_view key, const ByteRange& range, uint64_t max_bytes);
  http::HttpCall MakeUploadCall(std::string_view key, ByteView value,
                                std::optional<std::string> if_generation) const;
  // Uploads `value`; false on 412 when `if_generation` is set.
  Result<bool> Upload(std::string_view key, ByteView value, std::optional<std::string> if_generation);
  Result<bool> UploadResumable(std::string_view key, ByteView value);  // gcs_upload.cc
  Result<std::optional<uint64_t>> Size(std::string_view key) const;
  // Every page of an objects.list listing (see gcs_kvstore.cc).
  Status ListPages(std::string_view prefix, bool delimited, const std::string& op,
                   const std::function<void(std::string key, uint64_t size)>& on_key,
                   const std::function<void(std::string prefix)>& on_prefix);
  // After a read answered 404: NotFound when the bucket is missing (checked
  // only until the bucket was seen), else OK (the object is missing).
  Status CheckBucketAfter404(const std::string& op) const;
  Result<http::HttpResponse> Run(http::HttpCall call) const;

  // The generation a conditional upload of this object created, with the
  // bytes it stored, by key (values up to 1 MiB, at most 1024 keys): a later
  // CompareAndPut expecting those bytes writes with that generation at once
  // instead of reading the value first (an OCDBT manifest). Each is used once.
  struct KnownGeneration {
    std::string value;
    std::string generation;
  };
  std::optional<std::string> KnownGenerationFor(const std::string& key, ByteView expected);
  // After a conditional write failed without an answer (gcs_conditional.cc,
  // steps 1-3): true when the object holds `value` (the write was applied),
  // nullopt when it is still as the precondition requires (send it again),
  // else `failure`.
  Result<std::optional<bool>> SettleUnansweredWrite(std::string_view key, ByteView value,
                                                    std::string_view if_generation, Status failure);
  Result<std::pair<bool, http::HttpResponse>> ReadBack(std::string_view key, ByteView value);
  Result<bool> HoldsValue(std::string_view key, ByteView value);
  static constexpr int kMaxUnansweredUploads = 4;
  void RememberGeneration(const std::string& key, ByteView value,
                          std::optional<std::string> generation);

  GcsOptions options_;
  std::mutex generations_mu_;
  std::map<std::string, KnownGeneration> generations_;  // guarded by generations_mu_
  std::string url_;
  // Set once a request showed the bucket exists (an object read or written,
  // the bucket itself read), by this store or (through a process-wide set
  // of buckets seen) by another store on the same endpoint and bucket: from
  // then on a 404 on a read means a missing object, with no request to tell
  // a missing bucket apart.
  mutable std::atomic<bool> bucket_seen_{false};
  void SawBucket() const;
};

}  // namespace cairn::gcs
