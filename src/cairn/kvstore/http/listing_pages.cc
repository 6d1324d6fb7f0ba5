#include "cairn/kvstore/http/listing_pages.h"

namespace cairn::http {

Status ListingPages::Continue(const std::string& token, const std::string& where) {
  ++pages_;
  if (token.empty()) return DataLossError(where + ": page " + std::to_string(pages_) + " continues with an empty token");
  if (!tokens_.insert(token).second) {
    return DataLossError(where + ": page " + std::to_string(pages_) + " continues with a token an earlier page of " +
                         "this listing gave (`" + token.substr(0, 80) + "`): the listing would not end");
  }
  if (pages_ >= max_pages_) {
    return DataLossError(where + ": the listing goes on past " + std::to_string(max_pages_) +
                         " pages (CAIRN_LIST_MAX_PAGES)");
  }
  return Status::OK();
}

}  // namespace cairn::http
