#include "cairn/kvstore/ocdbt/io/ocdbt_url.h"

#include <cctype>
#include <cstdint>

#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"
#include "cairn/kvstore/prefix/prefix_kvstore.h"
#include "cairn/kvstore/url.h"
#include "cairn/util/hex.h"

namespace cairn::ocdbt {
namespace {

// Percent-encodes a key prefix for printing in an OCDBT URL, as TensorStore
// does: a literal '@' (which would start a version), '%', spaces, control
// and non-ASCII bytes become %XX.
std::string EncodeOcdbtPath(std::string_view path) {
  return PercentEncode(path, "-._~!$&'()*+,;=:/");
}

// Parses the version of `ocdbt:@<version>/...`: `v<generation>` (decimal,
// 1..2^64-1, as TensorStore). A commit time (`@2024-01-01T00:00:00Z/`) is
// TensorStore syntax cairn does not implement: Unimplemented, never read as
// something else.
Result<uint64_t> ParseOcdbtVersion(std::string_view version, std::string_view url) {
  if (version.empty() || version[0] != 'v') {
    if (!version.empty() && std::isdigit(static_cast<unsigned char>(version[0])) != 0) {
      return UnimplementedError("kvstore URL `" + std::string(url.substr(0, 300)) +
                                "`: OCDBT commit-time versions (`@" + std::string(version) +
                                "/`) are not supported; use a generation, `@v<number>/`");
    }
    return InvalidKvStoreUrl(url, "invalid OCDBT version `" + std::string(version) +
                                      "`: expected `@v<generation>/`");
  }
  std::string_view digits = version.substr(1);
  uint64_t generation = 0;
  bool valid = !digits.empty();
  for (char c : digits) {
    if (c < '0' || c > '9' || generation > (UINT64_MAX - (c - '0')) / 10) {
      valid = false;
      break;
    }
    generation = generation * 10 + static_cast<uint64_t>(c - '0');
  }
  if (!valid || generation == 0) {
    return InvalidKvStoreUrl(url, "invalid OCDBT generation number `" + std::string(version) +
                                      "`: expected `v` and a decimal number from 1 to 2^64-1");
  }
  return generation;
}

}  // namespace

Result<std::shared_ptr<KvStore>> OpenOcdbtUrl(std::shared_ptr<KvStore> base, std::string_view path,
                                              std::string_view url) {
  OcdbtOptions options;
  if (!path.empty() && path[0] == '@') {
    size_t slash = path.find('/');
    std::string_view version =
        path.substr(1, slash == std::string_view::npos ? std::string_view::npos : slash - 1);
    CAIRN_ASSIGN_OR_RETURN(options.generation, ParseOcdbtVersion(version, url));
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
  }
  CAIRN_ASSIGN_OR_RETURN(std::string prefix, UrlPathToKeyPrefix(path, url));
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<KvStore> db, OpenOcdbtKvStore(std::move(base), options));
  if (prefix.empty()) return db;
  std::string name = db->url() + EncodeOcdbtPath(prefix);
  return MakePrefixKvStore(std::move(db), prefix, std::move(name));
}

}  // namespace cairn::ocdbt
