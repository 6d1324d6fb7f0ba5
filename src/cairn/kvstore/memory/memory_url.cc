#include "cairn/kvstore/memory/memory_url.h"

#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/kvstore/prefix/prefix_kvstore.h"
#include "cairn/kvstore/url.h"

namespace cairn {

Result<std::shared_ptr<KvStore>> OpenMemoryUrl(std::string_view rest, std::string_view url) {
  CAIRN_ASSIGN_OR_RETURN(std::string prefix, UrlPathToKeyPrefix(rest, url));
  std::shared_ptr<KvStore> base = MemoryKvStore::Default();
  return MakePrefixKvStore(std::move(base), prefix, MemoryUrl(prefix));
}

std::string MemoryUrl(std::string_view prefix) { return "memory://" + std::string(prefix); }

}  // namespace cairn
