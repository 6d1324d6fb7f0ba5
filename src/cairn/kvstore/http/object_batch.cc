// Implements the numbered steps at the top of object_batch.h.
#include "cairn/kvstore/http/object_batch.h"

#include <set>

namespace cairn::http {

Status ApplyObjectBatch(KvStore& store, HttpClient& client, std::vector<KvMutation> mutations,
                        const ObjectBatchCalls& calls) {
  // Step 1.
  std::set<std::string_view> seen;
  bool repeats = false;
  for (const KvMutation& m : mutations) {
    CAIRN_RETURN_IF_ERROR(ValidateKey(m.key).Annotate(store.url()));
    repeats = repeats || !seen.insert(m.key).second;
  }
  // Step 2.
  if (repeats) return store.KvStore::ApplyBatch(std::move(mutations));
  // Step 3.
  auto is_large = [&](const KvMutation& m) { return m.value && m.value->size() >= calls.large_value_bytes; };
  std::vector<HttpCall> batch;
  for (const KvMutation& m : mutations) {
    if (is_large(m)) continue;
    batch.push_back(m.value ? calls.make_put(m.key, m.value->view()) : calls.make_delete(m.key));
    if (calls.authorize) CAIRN_RETURN_IF_ERROR(calls.authorize(batch.back()));
  }
  std::vector<HttpCall> described = batch;  // for error messages
  std::vector<Result<HttpResponse>> results = client.ExecuteAll(std::move(batch));
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].ok()) return results[i].status();
    const long s = results[i]->status;
    const bool is_delete = described[i].request.method == "DELETE";
    if (!(s == 200 || (is_delete && (s == 204 || s == 404)))) {
      return calls.explain(HttpStatusError(described[i], *results[i]));
    }
  }
  // Step 4.
  for (const KvMutation& m : mutations) {
    if (is_large(m)) CAIRN_RETURN_IF_ERROR(calls.put_large(m.key, m.value->view()));
  }
  return Status::OK();
}

Status DeleteObjectPrefix(KvStore& store, std::string_view prefix) {
  CAIRN_ASSIGN_OR_RETURN(std::vector<KeyInfo> keys, store.List(prefix));
  std::vector<KvMutation> deletes;
  deletes.reserve(keys.size());
  for (KeyInfo& k : keys) deletes.push_back({std::move(k.key), std::nullopt});
  return store.ApplyBatch(std::move(deletes));
}

}  // namespace cairn::http
