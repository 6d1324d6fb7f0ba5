#include "cairn/kvstore/file/file_url.h"

#include <stdlib.h>

#include <filesystem>

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

std::string AbsoluteUserPath(std::string_view path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path p = fs::absolute(fs::path(std::string(path)), ec);
  if (ec) p = fs::path(std::string(path));
  std::string abs = p.lexically_normal().string();
  if (!path.empty() && path.back() == '/' && (abs.empty() || abs.back() != '/')) abs += '/';
  return abs;
}

std::string ResolvedUserPath(std::string_view path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string absolute = AbsoluteUserPath(path);
  while (absolute.size() > 1 && absolute.back() == '/') absolute.pop_back();
  const fs::path abs(absolute);
  fs::path existing = abs;
  fs::path rest;
  while (!existing.empty() && existing != existing.root_path()) {
    if (fs::exists(existing, ec)) break;
    rest = existing.filename() / rest;
    existing = existing.parent_path();
  }
  char* real = ::realpath(existing.string().c_str(), nullptr);
  fs::path out = real != nullptr ? fs::path(real) : existing;
  ::free(real);
  if (!rest.empty()) out /= rest;
  std::string s = out.lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

std::string FileUrlOfPath(std::string_view absolute_path) {
  std::string out(kFileScheme);
  out.reserve(out.size() + absolute_path.size());
  for (char c : absolute_path) {
    switch (c) {
      case '%': out += "%25"; break;
      case '|': out += "%7C"; break;
      case '?': out += "%3F"; break;
      case '#': out += "%23"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace cairn
