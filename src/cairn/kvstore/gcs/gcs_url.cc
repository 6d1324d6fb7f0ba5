#include "cairn/kvstore/gcs/gcs_url.h"

#include "cairn/kvstore/gcs/gcs_kvstore.h"
#include "cairn/kvstore/url.h"

namespace cairn::gcs {

Result<std::shared_ptr<KvStore>> OpenGcsUrl(std::string_view rest, std::string_view url) {
  size_t slash = rest.find('/');
  std::string_view bucket = rest.substr(0, slash);
  Status valid = ValidateGcsBucketName(bucket);
  if (!valid.ok()) return InvalidKvStoreUrl(url, valid.message());
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  CAIRN_ASSIGN_OR_RETURN(std::string prefix, UrlPathToKeyPrefix(path, url));
  CAIRN_ASSIGN_OR_RETURN(GcsOptions options, GcsOptions::FromEnvironment(std::string(bucket), std::move(prefix)));
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<GcsKvStore> store, GcsKvStore::Open(std::move(options)));
  return std::shared_ptr<KvStore>(std::move(store));
}

}  // namespace cairn::gcs
