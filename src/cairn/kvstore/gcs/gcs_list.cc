// GcsKvStore's listings: objects.list pages, continued with their page
// tokens. A page is untrusted input: taken only as a whole JSON object, its
// sizes only as decimal strings that fit 64 bits, and the listing only
// within a page cap and without a repeated token (http/listing_pages.h).
#include <nlohmann/json.hpp>

#include <algorithm>

#include "cairn/kvstore/child_entries.h"
#include "cairn/kvstore/gcs/gcs_kvstore.h"
#include "cairn/kvstore/http/listing_pages.h"

namespace cairn::gcs {

using http::HttpCall;
using http::HttpResponse;
using http::UriEncode;

// The pages of one objects.list listing below `prefix`: every object
// (`on_key` with the key relative to the store's prefix) and, with
// `delimited`, every prefix up to the next '/' (`on_prefix`, relative,
// ending in '/').
Status GcsKvStore::ListPages(std::string_view prefix, bool delimited, const std::string& op,
                             const std::function<void(std::string key, uint64_t size)>& on_key,
                             const std::function<void(std::string prefix)>& on_prefix) {
  const std::string full = options_.prefix + std::string(prefix);
  const char* fields = delimited ? "items(name,size),prefixes,nextPageToken" : "items(name,size),nextPageToken";
  std::string token;
  http::ListingPages pages(options_.max_list_pages);
  while (true) {
    const std::string page = std::to_string(pages.page());
    std::string url = options_.endpoint + "/storage/v1/b/" + options_.bucket +
                      "/o?fields=" + UriEncode(fields, false) + "&prefix=" + UriEncode(full, false);
    if (delimited) url += "&delimiter=%2F";
    if (options_.list_page_size != 1000) {
      url += "&maxResults=" + std::to_string(std::clamp(options_.list_page_size, 1, 1000));
    }
    if (!token.empty()) url += "&pageToken=" + UriEncode(token, false);
    HttpCall call = MakeCall("GET", std::move(url), {}, {}, op);
    call.max_response_bytes = uint64_t{64} << 20;  // 1000 entries of names of at most 1 KiB, escaped
    const std::string where = op + " (GET " + call.request.url + ")";
    CAIRN_ASSIGN_OR_RETURN(HttpResponse r, Run(call));
    if (r.status == 404) {
      return NotFoundError(op + ": the bucket `" + options_.bucket + "` does not exist");
    }
    if (r.status != 200) return http::HttpStatusError(call, r);
    auto j = nlohmann::json::parse(r.body.as_string_view(), nullptr, false);
    if (!j.is_object()) return DataLossError(where + ": page " + page + " is not a whole JSON object");
    if (j.contains("items")) {
      if (!j["items"].is_array()) return DataLossError(where + ": `items` is not an array");
      for (const auto& item : j["items"]) {
        uint64_t size = 0;
        if (!item.is_object() || !item.contains("name") || !item["name"].is_string() ||
            !item.contains("size") || !item["size"].is_string() ||
            !ParseU64(item["size"].get<std::string>(), &size)) {
          return DataLossError(where + ": malformed entry on page " + page +
                               " (a name, and a size as a decimal string of at most 19 digits)");
        }
        std::string name = item["name"].get<std::string>();
        if (name.compare(0, full.size(), full) != 0) continue;
        on_key(name.substr(options_.prefix.size()), size);
      }
    }
    if (delimited && j.contains("prefixes")) {
      if (!j["prefixes"].is_array()) return DataLossError(where + ": `prefixes` is not an array");
      for (const auto& p : j["prefixes"]) {
        if (!p.is_string() || p.get<std::string>().compare(0, full.size(), full) != 0) {
          return DataLossError(where + ": malformed prefix on page " + page);
        }
        on_prefix(p.get<std::string>().substr(options_.prefix.size()));
      }
    }
    if (!j.contains("nextPageToken")) break;
    if (!j["nextPageToken"].is_string()) return DataLossError(where + ": page " + page + "'s nextPageToken is not a string");
    CAIRN_RETURN_IF_ERROR(pages.Continue(j["nextPageToken"].get<std::string>(), where));
    token = j["nextPageToken"].get<std::string>();
  }
  return Status::OK();
}

Result<std::vector<KeyInfo>> GcsKvStore::List(std::string_view prefix) {
  std::vector<KeyInfo> out;
  CAIRN_RETURN_IF_ERROR(ListPages(
      prefix, /*delimited=*/false, "listing `" + std::string(prefix) + "` of " + url_,
      [&](std::string key, uint64_t size) { out.push_back({std::move(key), size}); },
      [](std::string) {}));
  std::sort(out.begin(), out.end(), [](const KeyInfo& a, const KeyInfo& b) { return a.key < b.key; });
  return out;
}

// One listing with delimiter '/': a prefix holding many keys below a few
// children (a checkpoint root and its steps) takes one page per 1000
// children instead of one per 1000 keys.
Result<std::vector<ChildEntry>> GcsKvStore::ListChildren(std::string_view prefix) {
  CAIRN_RETURN_IF_ERROR(ValidatePrefix(prefix, "ListChildren prefix of " + url_, /*allow_empty=*/true));
  ChildEntries children(prefix);
  CAIRN_RETURN_IF_ERROR(ListPages(
      prefix, /*delimited=*/true, "listing the children of `" + std::string(prefix) + "` of " + url_,
      [&](std::string key, uint64_t) { children.AddKey(key); },
      [&](std::string p) { children.AddPrefix(p); }));
  return std::move(children).Sorted();
}

}  // namespace cairn::gcs
