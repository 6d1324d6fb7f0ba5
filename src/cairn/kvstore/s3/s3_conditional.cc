// Conditional writes of the S3 driver (s3_kvstore.h): PutIfAbsent with
// `If-None-Match: *`, CompareAndPut with `If-Match: <ETag>`. The ETag and
// SHA-256 of what a conditional write stored are remembered, so that the
// next CompareAndPut expecting those bytes (an OCDBT manifest) sends its
// If-Match at once instead of reading the object first. A conditional write
// whose answer never came is settled by reading the key back:
//   1. The key holds exactly the value sent: the write was applied (true).
//   2. The key is still as the condition requires (absent for
//      If-None-Match, the expected ETag for If-Match): the write was not
//      applied yet, so it is sent again (at most kMaxUnanswered times). A
//      late copy of an earlier attempt cannot apply twice: the first to
//      arrive changes the key, so every other copy fails its condition.
//   3. Otherwise the failure stands.
// A 412/404 answer to a resent write is settled the same way (step 1): the
// earlier attempt may be the one that applied.
#include <algorithm>
#include <mutex>

#include "cairn/kvstore/s3/s3_kvstore.h"

namespace cairn::s3 {

using http::HttpCall;
using http::HttpResponse;

namespace {
constexpr int kMaxUnanswered = 4;
}  // namespace

Result<bool> S3KvStore::ConditionalPut(std::string_view key, ByteView value, std::string header) {
  size_t colon = header.find(':');
  std::vector<std::pair<std::string, std::string>> headers = {
      {header.substr(0, colon), header.substr(colon + 2)}};
  HttpCall call = MakeCall("PUT", options_.prefix + std::string(key), {}, headers, value,
                           "conditionally writing " + Describe(key) + " (" + header + ")");
  call.idempotent = false;
  int unanswered = 0;
  // 409 ConditionalRequestConflict: another conditional write of the key is
  // in progress; S3 asks to try again.
  for (int attempt = 0;; ++attempt) {
    Result<HttpResponse> response = Run(call);
    if (!response.ok()) {
      RememberEtag(std::string(key), {}, std::nullopt);  // what is stored is unknown
      CAIRN_ASSIGN_OR_RETURN(std::optional<bool> settled,
                             SettleUnansweredWrite(key, value, header, response.status()));
      if (settled) return *settled;
      if (++unanswered < kMaxUnanswered) continue;  // step 2: not applied, send again
      return response.status();
    }
    HttpResponse& r = *response;
    if (r.status == 200) {
      RememberEtag(std::string(key), value, r.Header("etag"));
      return true;
    }
    if (r.status == 412 || r.status == 404) {
      // After an unanswered attempt, the condition may fail because that
      // attempt applied.
      if (unanswered > 0) return HoldsValue(key, value);
      return false;
    }
    if (r.status == 409 && attempt < 5) continue;
    return Explain(http::HttpStatusError(call, r));
  }
}

// The key read back after a write got no answer; true in `.first` when it
// holds exactly `value` (its ETag is then remembered).
Result<std::pair<bool, HttpResponse>> S3KvStore::ReadBack(std::string_view key, ByteView value) {
  HttpCall get = MakeCall("GET", options_.prefix + std::string(key), {}, {}, {},
                          "reading " + Describe(key) + " back after a conditional write got no answer");
  CAIRN_ASSIGN_OR_RETURN(HttpResponse r, Run(get));
  if (r.status != 200 && r.status != 404) return Explain(http::HttpStatusError(get, r));
  const bool holds = r.status == 200 && r.body.size() == value.size() &&
                     std::equal(value.begin(), value.end(), r.body.view().begin());
  if (holds) RememberEtag(std::string(key), value, r.Header("etag"));
  return std::make_pair(holds, std::move(r));
}

Result<bool> S3KvStore::HoldsValue(std::string_view key, ByteView value) {
  CAIRN_ASSIGN_OR_RETURN(auto read, ReadBack(key, value));
  return read.first;
}

// Steps 1-3 above for a conditional write that got no answer (the
// connection closed after the request may have reached S3; http_client.h
// never resends it): true when it applied, nullopt when it can be sent
// again, else `failure`.
Result<std::optional<bool>> S3KvStore::SettleUnansweredWrite(std::string_view key, ByteView value,
                                                             std::string_view header, Status failure) {
  if (failure.code() != StatusCode::kUnavailable) return failure;
  Result<std::pair<bool, HttpResponse>> read = ReadBack(key, value);
  if (!read.ok()) return failure;
  if (read->first) return std::optional<bool>(true);
  const HttpResponse& r = read->second;
  constexpr std::string_view kIfMatch = "if-match: ";
  const bool absent_as_required = header == "if-none-match: *" && r.status == 404;
  std::optional<std::string> etag = r.status == 200 ? r.Header("etag") : std::nullopt;
  const bool etag_as_required =
      header.substr(0, kIfMatch.size()) == kIfMatch && etag && *etag == header.substr(kIfMatch.size());
  if (absent_as_required || etag_as_required) return std::optional<bool>();
  return failure;
}

Result<bool> S3KvStore::PutIfAbsent(std::string_view key, ByteView value) {
  return CompareAndPut(key, std::nullopt, value);
}

Result<bool> S3KvStore::CompareAndPut(std::string_view key, std::optional<ByteView> expected,
                                      ByteView value) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate(url_));
  if (!expected) return ConditionalPut(key, value, "if-none-match: *");
  if (std::optional<std::string> etag = KnownEtagFor(std::string(key), *expected)) {
    // The value this object stored last, unless the key changed since: then
    // the If-Match fails and the value is read and compared below.
    CAIRN_ASSIGN_OR_RETURN(bool stored, ConditionalPut(key, value, "if-match: " + *etag));
    if (stored) return true;
  }
  std::string op = "reading " + Describe(key) + " for a compare-and-put";
  HttpCall get = MakeCall("GET", options_.prefix + std::string(key), {}, {}, {}, op);
  CAIRN_ASSIGN_OR_RETURN(HttpResponse r, Run(get));
  if (r.status == 404) return false;
  if (r.status != 200) return Explain(http::HttpStatusError(get, r));
  if (!(r.body.view().size() == expected->size() &&
        std::equal(expected->begin(), expected->end(), r.body.view().begin()))) {
    return false;
  }
  std::optional<std::string> etag = r.Header("etag");
  if (!etag) return DataLossError(op + ": response without an ETag");
  return ConditionalPut(key, value, "if-match: " + *etag);
}

std::optional<std::string> S3KvStore::KnownEtagFor(const std::string& key, ByteView expected) {
  std::lock_guard<std::mutex> lock(etags_mu_);
  auto it = etags_.find(key);
  if (it == etags_.end()) return std::nullopt;
  KnownEtag known = it->second;
  etags_.erase(it);  // used once: a failed If-Match must not be tried again
  if (known.sha256 != Sha256Hex(expected)) return std::nullopt;
  return known.etag;
}

void S3KvStore::RememberEtag(const std::string& key, ByteView value,
                             std::optional<std::string> etag) {
  constexpr size_t kMaxKnownEtags = 1024;
  std::lock_guard<std::mutex> lock(etags_mu_);
  if (!etag || etag->empty()) {
    etags_.erase(key);
    return;
  }
  if (etags_.size() >= kMaxKnownEtags && etags_.count(key) == 0) etags_.clear();
  etags_[key] = {Sha256Hex(value), std::move(*etag)};
}

}  // namespace cairn::s3
