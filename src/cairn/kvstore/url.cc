#include "cairn/kvstore/url.h"

#include "cairn/kvstore/drivers.h"
#include "cairn/kvstore/file/file_kvstore.h"

namespace cairn {
namespace {

constexpr std::string_view kSchemeEnd = "://";

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The driver row of a one-part URL "<scheme>://...", or nullptr.
const KvStoreDriver* DriverOf(std::string_view url) {
  size_t sep = url.find(kSchemeEnd);
  if (sep == std::string_view::npos || sep == 0) return nullptr;
  std::string_view scheme = url.substr(0, sep);
  for (const KvStoreDriver& d : KvStoreDrivers()) {
    if (d.scheme == scheme) return &d;
  }
  return nullptr;
}

Result<std::shared_ptr<KvStore>> ApplyAdapter(std::shared_ptr<KvStore> base, std::string_view part,
                                              std::string_view url) {
  size_t colon = part.find(':');
  if (colon == std::string_view::npos || colon == 0) {
    return InvalidKvStoreUrl(url, "expected `<adapter>:[path]`, got `" + std::string(part) + "`");
  }
  std::string_view scheme = part.substr(0, colon);
  for (const KvStoreAdapter& a : KvStoreAdapters()) {
    if (a.scheme == scheme) return a.open(std::move(base), part.substr(colon + 1), url);
  }
  return InvalidKvStoreUrl(url, "unknown kvstore adapter `" + std::string(scheme) + ":`");
}

}  // namespace

Status InvalidKvStoreUrl(std::string_view url, std::string_view why) {
  return InvalidArgumentError("invalid kvstore URL `" + std::string(url.substr(0, 300)) + "`: " +
                              std::string(why));
}

Result<std::string> PercentDecodeUrlPart(std::string_view s, std::string_view url) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return InvalidKvStoreUrl(url, "truncated %-escape");
    int hi = HexValue(s[i + 1]);
    int lo = HexValue(s[i + 2]);
    if (hi < 0 || lo < 0) return InvalidKvStoreUrl(url, "malformed %-escape");
    char c = static_cast<char>(hi * 16 + lo);
    if (c == '\0') return InvalidKvStoreUrl(url, "%00 in path");
    out += c;
    i += 2;
  }
  return out;
}

Result<std::string> UrlPathToKeyPrefix(std::string_view encoded, std::string_view url) {
  CAIRN_ASSIGN_OR_RETURN(std::string path, PercentDecodeUrlPart(encoded, url));
  if (path.empty()) return path;
  if (path.back() != '/') path += '/';
  Status valid = ValidateFileKey(path.substr(0, path.size() - 1));
  if (!valid.ok()) return InvalidKvStoreUrl(url, "path `" + path + "`: " + std::string(valid.message()));
  return path;
}

Result<std::vector<std::string>> SplitUrlPipeline(std::string_view url) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t bar = url.find('|', start);
    std::string_view part =
        url.substr(start, bar == std::string_view::npos ? std::string_view::npos : bar - start);
    if (part.empty()) return InvalidKvStoreUrl(url, "empty part in the `|` pipeline");
    parts.emplace_back(part);
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  return parts;
}

Result<std::shared_ptr<KvStore>> OpenKvStore(std::string_view url) {
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitUrlPipeline(url));
  const std::string& first = parts[0];
  size_t sep = first.find(kSchemeEnd);
  if (sep == std::string::npos || sep == 0) {
    return InvalidKvStoreUrl(url, "expected `<scheme>://...` as the first part");
  }
  std::string_view scheme = std::string_view(first).substr(0, sep);
  std::string_view rest = std::string_view(first).substr(sep + kSchemeEnd.size());
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return InvalidKvStoreUrl(url, "query strings and fragments are not supported");
  }
  const KvStoreDriver* driver = DriverOf(first);
  if (driver == nullptr) return InvalidKvStoreUrl(url, "unknown kvstore scheme `" + std::string(scheme) + "`");
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<KvStore> store, driver->open(rest, url));
  for (size_t i = 1; i < parts.size(); ++i) {
    CAIRN_ASSIGN_OR_RETURN(store, ApplyAdapter(std::move(store), parts[i], url));
  }
  return store;
}

bool IsKvStoreDriverUrl(std::string_view url) {
  return url.find('|') == std::string_view::npos && DriverOf(url) != nullptr;
}

std::string KvStoreDriverUrlForms() {
  std::string out;
  const std::span<const KvStoreDriver> drivers = KvStoreDrivers();
  for (size_t i = 0; i < drivers.size(); ++i) {
    if (i > 0) out += i + 1 == drivers.size() ? " or " : ", ";
    out += std::string(drivers[i].scheme) + std::string(kSchemeEnd);
  }
  return out;
}

Result<std::shared_ptr<KvStore>> OpenKvStoreSpec(std::string_view driver, std::string_view path) {
  std::string supported;
  for (const KvStoreDriver& d : KvStoreDrivers()) {
    if (!d.spec_is_path) continue;
    if (d.scheme == driver) {
      const std::string url = std::string(d.scheme) + std::string(kSchemeEnd) + std::string(path);
      return OpenKvStore(url);
    }
    supported += (supported.empty() ? "" : ", ") + std::string(d.scheme);
  }
  return InvalidArgumentError("base driver `" + std::string(driver) + "` is not supported (" + supported + ")");
}

Result<ParentKvStore> OpenParentKvStore(std::string_view url_in) {
  const std::string url(url_in);
  const KvStoreDriver* driver = IsKvStoreDriverUrl(url) ? DriverOf(url) : nullptr;
  if (driver == nullptr) return InvalidKvStoreUrl(url, "expected one `<scheme>://...` part of a known driver");
  const size_t sep = url.find(kSchemeEnd) + kSchemeEnd.size();
  const std::string head = url.substr(0, sep);
  std::string rest = url.substr(sep);
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  if (driver->bucket && rest.find('/') == std::string::npos) {
    // The bucket itself: its root (nothing can be committed there).
    const std::string root_url = head + rest + "/";
    CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<KvStore> store, OpenKvStore(root_url));
    return ParentKvStore{std::move(store), "", root_url};
  }
  const size_t slash = rest.rfind('/');
  const std::string parent_url = head + (slash == std::string::npos ? "" : rest.substr(0, slash + 1));
  const std::string encoded_name = slash == std::string::npos ? rest : rest.substr(slash + 1);
  std::string name;
  if (!encoded_name.empty()) {
    CAIRN_ASSIGN_OR_RETURN(name, UrlPathToKeyPrefix(encoded_name, url));
    if (name.empty() || name.find('/') != name.size() - 1) {
      return InvalidArgumentError("`" + url + "`: the last path component `" + encoded_name +
                                  "` must name one directory (an escaped '/' is not allowed)");
    }
  }
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<KvStore> store, OpenKvStore(parent_url));
  std::string store_url = store->url();
  return ParentKvStore{std::move(store), std::move(name), std::move(store_url)};
}

}  // namespace cairn
