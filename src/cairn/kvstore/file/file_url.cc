#include "cairn/kvstore/file/file_url.h"

#include "cairn/kvstore/file/file_kvstore.h"
#include "cairn/kvstore/url.h"

namespace cairn {
namespace {
constexpr std::string_view kFileScheme = "file://";
}  // namespace

Result<std::shared_ptr<KvStore>> OpenFileUrl(std::string_view rest, std::string_view url) {
  if (rest.empty() || rest.front() != '/') {
    return InvalidKvStoreUrl(url, "a file URL needs an absolute path: file:///abs/dir/");
  }
  CAIRN_ASSIGN_OR_RETURN(std::string path, PercentDecodeUrlPart(rest, url));
  std::string_view inner = path;
  while (!inner.empty() && inner.front() == '/') inner.remove_prefix(1);
  while (!inner.empty() && inner.back() == '/') inner.remove_suffix(1);
  if (!inner.empty()) {
    Status valid = ValidateFileKey(inner);
    if (!valid.ok()) return InvalidKvStoreUrl(url, "path: " + std::string(valid.message()));
  }
  return std::shared_ptr<KvStore>(std::make_shared<FileKvStore>(path));
}

std::string FileUrl(std::string_view path) { return std::string(kFileScheme) + std::string(path); }

std::optional<std::string> FileUrlPath(std::string_view url) {
  if (url.find('|') != std::string_view::npos || !url.starts_with(kFileScheme)) return std::nullopt;
  return std::string(url.substr(kFileScheme.size()));
}

}  // namespace cairn
