// The batched writes and deletes the object-store drivers (s3, gcs) share:
// KvStore::ApplyBatch and DeletePrefix with every small request in flight at
// once over the HttpClient. What differs per service (how a PUT and a DELETE
// are built, how a large value is uploaded, how an error is explained) comes
// in as ObjectBatchCalls.
//
// ApplyObjectBatch:
//   1. Every key is validated (InvalidArgument naming the store's URL).
//   2. A batch naming a key twice keeps its order: KvStore's default (one
//      mutation after the other).
//   3. Otherwise the deletes and the puts below `large_value_bytes` run
//      concurrently (ExecuteAll); a DELETE answered 204 or 404 succeeded.
//   4. Then each large value is uploaded on its own (multipart, resumable).
// The first error is returned; there is no atomicity across keys (each key
// is written whole or not at all, as the service guarantees).
//
// Thread safety: no state of its own; the ObjectBatchCalls functions are
// called on the caller's thread (the calls' `prepare` on the client's).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/kvstore/http/http_client.h"
#include "cairn/kvstore/kvstore.h"

namespace cairn::http {

struct ObjectBatchCalls {
  // Values of at least this many bytes go through `put_large`.
  uint64_t large_value_bytes = 0;
  std::function<HttpCall(const std::string& key, ByteView value)> make_put;
  std::function<HttpCall(const std::string& key)> make_delete;
  std::function<Status(const std::string& key, ByteView value)> put_large;
  // Adds credentials to each PUT and DELETE built above before it is sent
  // (e.g. a bearer token); unset: the calls go as built.
  std::function<Status(HttpCall&)> authorize;
  // Turns an unexpected answer's error into the driver's (may add hints).
  std::function<Status(Status)> explain = [](Status s) { return s; };
};

Status ApplyObjectBatch(KvStore& store, HttpClient& client, std::vector<KvMutation> mutations,
                        const ObjectBatchCalls& calls);

// Lists `prefix` and deletes every key found with one ApplyBatch.
Status DeleteObjectPrefix(KvStore& store, std::string_view prefix);

}  // namespace cairn::http
