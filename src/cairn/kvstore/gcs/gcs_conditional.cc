// Conditional writes of the GCS driver (gcs_kvstore.h): PutIfAbsent with
// `ifGenerationMatch=0`, CompareAndPut with the generation of the expected
// value. The generation a conditional upload created is remembered with its
// bytes, so that the next CompareAndPut expecting them (an OCDBT manifest)
// uploads at once instead of reading the object first. A conditional write
// whose answer never came is settled by reading the object back:
//   1. The object holds exactly the value sent: the write was applied (true).
//   2. The object is still as the precondition requires (absent for
//      ifGenerationMatch=0, else of that generation): the write was not
//      applied yet, so Upload sends it again (at most kMaxUnansweredUploads
//      times). A late copy of an earlier attempt cannot apply twice: the
//      first to arrive changes the generation, so every other copy fails.
//   3. Otherwise the failure stands.
// A 412 answer to a resent write is settled by step 1: the earlier attempt
// may be the one that applied.
#include <algorithm>
#include <mutex>

#include "cairn/kvstore/gcs/gcs_kvstore.h"

namespace cairn::gcs {

using http::HttpCall;
using http::HttpResponse;

Result<bool> GcsKvStore::PutIfAbsent(std::string_view key, ByteView value) {
  return CompareAndPut(key, std::nullopt, value);
}

Result<bool> GcsKvStore::CompareAndPut(std::string_view key, std::optional<ByteView> expected,
                                       ByteView value) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate(url_));
  if (!expected) return Upload(key, value, "0");
  if (std::optional<std::string> g = KnownGenerationFor(std::string(key), *expected)) {
    // The value this object stored last, unless the key changed since: then
    // the precondition fails and the value is read and compared below.
    CAIRN_ASSIGN_OR_RETURN(bool stored, Upload(key, value, *g));
    if (stored) return true;
  }
  std::string op = "reading " + Describe(key) + " for a compare-and-put";
  HttpCall get = MakeCall("GET", ObjectUrl(key) + "?alt=media", {}, {}, op);
  CAIRN_ASSIGN_OR_RETURN(HttpResponse r, Run(get));
  if (r.status == 404) return false;
  if (r.status != 200) return http::HttpStatusError(get, r);
  if (!(r.body.size() == expected->size() &&
        std::equal(expected->begin(), expected->end(), r.body.view().begin()))) {
    return false;
  }
  std::optional<std::string> generation = r.Header("x-goog-generation");
  uint64_t g = 0;
  if (!generation || !ParseU64(*generation, &g)) {
    return DataLossError(op + ": response without a valid x-goog-generation header");
  }
  return Upload(key, value, *generation);
}

std::optional<std::string> GcsKvStore::KnownGenerationFor(const std::string& key,
                                                          ByteView expected) {
  std::lock_guard<std::mutex> lock(generations_mu_);
  auto it = generations_.find(key);
  if (it == generations_.end()) return std::nullopt;
  KnownGeneration known = std::move(it->second);
  generations_.erase(it);
  if (AsBytes(known.value).size() != expected.size() ||
      !std::equal(expected.begin(), expected.end(), AsBytes(known.value).begin())) {
    return std::nullopt;
  }
  return known.generation;
}

void GcsKvStore::RememberGeneration(const std::string& key, ByteView value,
                                    std::optional<std::string> generation) {
  constexpr size_t kMaxKnown = 1024;
  constexpr size_t kMaxValueBytes = size_t{1} << 20;
  uint64_t g = 0;
  std::lock_guard<std::mutex> lock(generations_mu_);
  if (!generation || !ParseU64(*generation, &g) || value.size() > kMaxValueBytes) {
    generations_.erase(key);
    return;
  }
  if (generations_.size() >= kMaxKnown && generations_.count(key) == 0) generations_.clear();
  generations_[key] = {std::string(AsStringView(value)), std::move(*generation)};
}

// The object read back after a write got no answer; true in `.first` when
// it holds exactly `value` (its generation is then remembered).
Result<std::pair<bool, HttpResponse>> GcsKvStore::ReadBack(std::string_view key, ByteView value) {
  HttpCall get = MakeCall("GET", ObjectUrl(key) + "?alt=media", {}, {},
                          "reading " + Describe(key) + " back after a conditional write got no answer");
  CAIRN_ASSIGN_OR_RETURN(HttpResponse r, Run(get));
  if (r.status != 200 && r.status != 404) return http::HttpStatusError(get, r);
  const bool holds = r.status == 200 && r.body.size() == value.size() &&
                     std::equal(value.begin(), value.end(), r.body.view().begin());
  if (holds) RememberGeneration(std::string(key), value, r.Header("x-goog-generation"));
  return std::make_pair(holds, std::move(r));
}

Result<bool> GcsKvStore::HoldsValue(std::string_view key, ByteView value) {
  CAIRN_ASSIGN_OR_RETURN(auto read, ReadBack(key, value));
  return read.first;
}

// Steps 1-3 above for a conditional upload that got no answer (the
// connection closed after the request may have reached GCS; http_client.h
// never resends it): true when it applied, nullopt when it can be sent
// again, else `failure`.
Result<std::optional<bool>> GcsKvStore::SettleUnansweredWrite(std::string_view key, ByteView value,
                                                              std::string_view if_generation, Status failure) {
  if (failure.code() != StatusCode::kUnavailable) return failure;
  Result<std::pair<bool, HttpResponse>> read = ReadBack(key, value);
  if (!read.ok()) return failure;
  if (read->first) return std::optional<bool>(true);
  const HttpResponse& r = read->second;
  std::optional<std::string> generation = r.status == 200 ? r.Header("x-goog-generation") : std::nullopt;
  const bool as_required = (if_generation == "0" && r.status == 404) || (generation && *generation == if_generation);
  if (as_required) return std::optional<bool>();
  return failure;
}

}  // namespace cairn::gcs
