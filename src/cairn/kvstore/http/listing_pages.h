// The pages of one object listing (S3 ListObjectsV2, GCS objects.list),
// as a server hands them out with continuation tokens. A server decides
// neither how many pages a listing has nor that it goes round in circles:
//
//  1. A listing has at most `max_pages` pages (S3Options / GcsOptions
//     `max_list_pages`, CAIRN_LIST_MAX_PAGES; 100,000 by default, i.e. 10^8
//     keys at 1000 a page). The page after the last allowed one is an error.
//  2. Every token a listing is continued with is new to that listing: one
//     seen before (the last page's, or any earlier one's) is an error, so a
//     cycle of tokens ends at its first repeat.
//  3. Errors are DataLoss naming the listing and the URL of the last page.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>

#include "cairn/status.h"

namespace cairn::http {

inline constexpr uint64_t kDefaultMaxListPages = 100000;

class ListingPages {
 public:
  explicit ListingPages(uint64_t max_pages) : max_pages_(max_pages == 0 ? 1 : max_pages) {}

  // The number of the page about to be requested (1 for the first).
  uint64_t page() const { return pages_ + 1; }

  // A page was received and says the listing continues with `token`. An
  // error (steps 1 and 2) when it may not; `where` names the listing and the
  // page's URL.
  Status Continue(const std::string& token, const std::string& where);

 private:
  uint64_t max_pages_;
  uint64_t pages_ = 0;
  std::unordered_set<std::string> tokens_;
};

}  // namespace cairn::http
