// S3KvStore's listings: ListObjectsV2 pages, continued with their tokens.
// A page is untrusted input: it is taken only whole (the closing tag of
// ListBucketResult, every element closed, IsTruncated present), its sizes
// only as decimal numbers that fit 64 bits, and the listing only within a
// page cap and without a repeated token (http/listing_pages.h).
#include <algorithm>

#include "cairn/kvstore/child_entries.h"
#include "cairn/kvstore/http/listing_pages.h"
#include "cairn/kvstore/http/response_limits.h"
#include "cairn/kvstore/s3/s3_kvstore.h"
#include "cairn/kvstore/s3/s3_xml.h"

namespace cairn::s3 {

using http::HttpCall;
using http::HttpResponse;

namespace {

size_t Count(std::string_view text, std::string_view what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string_view::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

// Why `xml` is not a whole ListObjectsV2 page, or "".
std::string WholePageProblem(std::string_view xml) {
  while (!xml.empty() && (xml.back() == ' ' || xml.back() == '\n' || xml.back() == '\r' || xml.back() == '\t')) {
    xml.remove_suffix(1);
  }
  constexpr std::string_view kClose = "</ListBucketResult>";
  if (xml.find("<ListBucketResult") == std::string_view::npos) return "no ListBucketResult element";
  if (xml.size() < kClose.size() || xml.substr(xml.size() - kClose.size()) != kClose) {
    return "the page is cut off (it does not end with </ListBucketResult>)";
  }
  for (std::string_view tag : {"Contents", "CommonPrefixes", "Key", "Size", "Prefix"}) {
    const std::string open = "<" + std::string(tag) + ">", close = "</" + std::string(tag) + ">";
    if (Count(xml, open) != Count(xml, close)) return "an unclosed <" + std::string(tag) + "> element";
  }
  return "";
}

}  // namespace

// The pages of one ListObjectsV2 listing below `prefix`: every key (`on_key`
// with the key relative to the store's prefix) and, with `delimited`, every
// common prefix up to the next '/' (`on_prefix`, relative, ending in '/').
Status S3KvStore::ListPages(std::string_view prefix, bool delimited, const std::string& op,
                            const std::function<Status(std::string key, uint64_t size)>& on_key,
                            const std::function<void(std::string prefix)>& on_prefix) {
  std::string token;
  const std::string full_prefix = options_.prefix + std::string(prefix);
  http::ListingPages pages(options_.max_list_pages);
  while (true) {
    const std::string page = std::to_string(pages.page());
    std::vector<std::pair<std::string, std::string>> query = {{"list-type", "2"},
                                                              {"prefix", full_prefix}};
    if (delimited) query.emplace_back("delimiter", "/");
    if (!token.empty()) query.emplace_back("continuation-token", token);
    if (options_.list_page_size != 1000) {
      query.emplace_back("max-keys", std::to_string(std::clamp(options_.list_page_size, 1, 1000)));
    }
    HttpCall call = MakeCall("GET", "", std::move(query), {}, {}, op);
    call.max_response_bytes = uint64_t{64} << 20;  // 1000 entries of keys of at most 1 KiB, escaped
    const std::string where = op + " (GET " + call.request.url + ")";
    auto malformed = [&](const std::string& what) {
      return DataLossError(where + ": malformed ListObjectsV2 page " + page + ": " + what);
    };
    CAIRN_ASSIGN_OR_RETURN(HttpResponse r, Run(call));
    if (r.status == 404 && r.body.as_string_view().find("NoSuchBucket") != std::string_view::npos) {
      return NotFoundError(op + ": the bucket `" + options_.bucket + "` does not exist");
    }
    if (r.status != 200) return Explain(http::HttpStatusError(call, r));
    std::string_view xml = r.body.as_string_view();
    if (std::string problem = WholePageProblem(xml); !problem.empty()) return malformed(problem);
    std::optional<std::string> truncated = XmlText(xml, "IsTruncated");
    if (!truncated || (*truncated != "true" && *truncated != "false")) {
      return malformed("IsTruncated is missing or neither true nor false");
    }
    for (std::string_view contents : XmlElements(xml, "Contents")) {
      std::optional<std::string> key = XmlText(contents, "Key");
      std::optional<std::string> size = XmlText(contents, "Size");
      std::optional<uint64_t> n = size ? http::ParseContentLength(*size) : std::nullopt;
      if (!key) return malformed("an entry without a Key");
      if (!n) {
        return malformed("the size of `" + key->substr(0, 200) + "` is `" + size.value_or("<none>").substr(0, 40) +
                         "`, not a byte count");
      }
      if (key->compare(0, full_prefix.size(), full_prefix) != 0) continue;
      CAIRN_RETURN_IF_ERROR(on_key(key->substr(options_.prefix.size()), *n));
    }
    if (delimited) {
      for (std::string_view common : XmlElements(xml, "CommonPrefixes")) {
        std::optional<std::string> p = XmlText(common, "Prefix");
        if (!p || p->size() <= full_prefix.size() || p->back() != '/' ||
            p->compare(0, full_prefix.size(), full_prefix) != 0) {
          return malformed("a common prefix outside `" + full_prefix + "`");
        }
        on_prefix(p->substr(options_.prefix.size()));
      }
    }
    if (*truncated != "true") break;
    std::optional<std::string> next = XmlText(xml, "NextContinuationToken");
    if (!next || next->empty()) return malformed("a truncated page without a continuation token");
    CAIRN_RETURN_IF_ERROR(pages.Continue(*next, where));
    token = *next;
  }
  return Status::OK();
}

Result<std::vector<KeyInfo>> S3KvStore::List(std::string_view prefix) {
  std::vector<KeyInfo> out;
  CAIRN_RETURN_IF_ERROR(ListPages(
      prefix, /*delimited=*/false, "listing `" + std::string(prefix) + "` of " + url_,
      [&](std::string key, uint64_t size) {
        out.push_back({std::move(key), size});
        return Status::OK();
      },
      [](std::string) {}));
  std::sort(out.begin(), out.end(), [](const KeyInfo& a, const KeyInfo& b) { return a.key < b.key; });
  return out;
}

// One listing with delimiter '/': a prefix holding many keys below a few
// children (a checkpoint root and its steps) takes one page per 1000
// children instead of one per 1000 keys.
Result<std::vector<ChildEntry>> S3KvStore::ListChildren(std::string_view prefix) {
  CAIRN_RETURN_IF_ERROR(ValidatePrefix(prefix, "ListChildren prefix of " + url_, /*allow_empty=*/true));
  ChildEntries children(prefix);
  CAIRN_RETURN_IF_ERROR(ListPages(
      prefix, /*delimited=*/true, "listing the children of `" + std::string(prefix) + "` of " + url_,
      [&](std::string key, uint64_t) {
        children.AddKey(key);
        return Status::OK();
      },
      [&](std::string p) { children.AddPrefix(p); }));
  return std::move(children).Sorted();
}

}  // namespace cairn::s3
