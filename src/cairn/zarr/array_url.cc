#include "cairn/zarr/array_url.h"

#include <cctype>
#include <string>
#include <utility>
#include <vector>

#include "cairn/kvstore/file/file_url.h"
#include "cairn/kvstore/url.h"

namespace cairn {
namespace {

// True if `s` starts with a URL scheme followed by ':' (RFC 3986:
// ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )).
bool HasScheme(std::string_view s) {
  if (s.empty() || !std::isalpha(static_cast<unsigned char>(s[0]))) return false;
  for (size_t i = 1; i < s.size(); ++i) {
    char c = s[i];
    if (c == ':') return true;
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '+' && c != '-' && c != '.') {
      return false;
    }
  }
  return false;
}

// The path part of one pipeline component: what follows "scheme:" and an
// optional "//" ("file:///a" -> "/a", "memory://x" -> "x", "ocdbt:p" -> "p").
std::string_view ComponentPath(std::string_view component) {
  size_t colon = component.find(':');
  if (colon == std::string_view::npos) return {};
  std::string_view rest = component.substr(colon + 1);
  if (rest.substr(0, 2) == "//") rest.remove_prefix(2);
  return rest;
}

// Appends a '/' to the component's path unless it is empty or already ends
// with one (TensorStore's EnsureDirectoryPath).
void EnsureDirectoryPath(std::string& component) {
  std::string_view path = ComponentPath(component);
  if (!path.empty() && path.back() != '/') component += '/';
}

// Joins `suffix` to the component's path as TensorStore's AppendPathComponent
// does: a '/' goes between them only when neither side supplies one.
void AppendPath(std::string& component, std::string_view suffix) {
  if (suffix.empty()) return;
  std::string_view path = ComponentPath(component);
  if (!path.empty() && path.back() != '/' && suffix.front() != '/') component += '/';
  component.append(suffix);
}


// Recognizes an array driver component; returns its format and path.
std::optional<std::pair<ZarrFormat, std::string_view>> ParseDriverComponent(
    std::string_view component) {
  static constexpr std::pair<std::string_view, ZarrFormat> kDrivers[] = {
      {"zarr3:", ZarrFormat::kV3},
      {"zarr2:", ZarrFormat::kV2},
  };
  for (const auto& [prefix, format] : kDrivers) {
    if (component.substr(0, prefix.size()) == prefix) {
      std::string_view path = component.substr(prefix.size());
      if (path.substr(0, 2) == "//") path.remove_prefix(2);
      return std::make_pair(format, path);
    }
  }
  return std::nullopt;
}

}  // namespace

std::string NormalizeUrl(std::string_view url_or_path) {
  size_t bar = url_or_path.find('|');
  std::string_view first = url_or_path.substr(0, bar);
  std::string_view tail = bar == std::string_view::npos ? std::string_view() : url_or_path.substr(bar);
  if (first.empty() || HasScheme(first)) return std::string(url_or_path);
  return FileUrlOfPath(AbsoluteUserPath(first)) + std::string(tail);
}

Result<ArrayUrl> ParseArrayUrl(std::string_view url) {
  if (url.empty()) return InvalidArgumentError("empty array URL");
  std::string_view first = url.substr(0, url.find('|'));
  if (!HasScheme(first)) {
    return InvalidArgumentError("array URL `" + std::string(url) + "`: `" + std::string(first) +
                                "` has no URL scheme (a local path is written " + FileUrl("/abs/dir/") + ")");
  }
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitUrlPipeline(url));
  ArrayUrl out;
  std::string_view array_path;
  for (size_t i = 0; i < parts.size(); ++i) {
    auto driver = ParseDriverComponent(parts[i]);
    if (!driver) continue;
    if (i == 0) {
      return InvalidArgumentError("array URL `" + std::string(url) + "`: the driver part `" +
                                  parts[i] + "` needs a kvstore before it");
    }
    if (i + 1 != parts.size()) {
      return InvalidArgumentError("array URL `" + std::string(url) + "`: the driver part `" +
                                  parts[i] + "` must be the last part");
    }
    if (driver->second.find('?') != std::string_view::npos) {
      return InvalidArgumentError("array URL `" + std::string(url) +
                                  "`: query strings are not supported");
    }
    if (driver->second.find('#') != std::string_view::npos) {
      return InvalidArgumentError("array URL `" + std::string(url) +
                                  "`: fragment identifiers are not supported");
    }
    out.format = driver->first;
    array_path = driver->second;
  }
  if (out.format) {
    // The zarr drivers treat the array path as a directory.
    parts.pop_back();
    std::string& last = parts.back();
    AppendPath(last, array_path);
    EnsureDirectoryPath(last);
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out.kvstore_url += '|';
    out.kvstore_url += parts[i];
  }
  return out;
}

Result<std::shared_ptr<ZarrArray>> OpenZarrArray(std::string_view url) {
  auto parsed = ParseArrayUrl(url);
  if (!parsed.ok()) return parsed.status();
  auto store = OpenKvStore(parsed->kvstore_url);
  if (!store.ok()) return store.status().Annotate("opening array `" + std::string(url) + "`");
  auto array = ZarrArray::Open(*std::move(store), "", parsed->format);
  if (!array.ok()) return array.status().Annotate("opening array `" + std::string(url) + "`");
  return array;
}

Result<std::shared_ptr<ZarrArray>> CreateZarrArray(std::string_view url, const Json& metadata,
                                                   const CreateOptions& options) {
  auto parsed = ParseArrayUrl(url);
  if (!parsed.ok()) return parsed.status();
  if (!metadata.is_object()) {
    return InvalidArgumentError("creating array `" + std::string(url) +
                                "`: metadata must be a JSON object");
  }
  std::optional<ZarrFormat> from_metadata;
  if (const Json* zf = FindField(metadata, "zarr_format")) {
    auto n = JsonToInt(*zf, "zarr_format");
    if (!n.ok() || (*n != 2 && *n != 3)) {
      return InvalidArgumentError("creating array `" + std::string(url) + "`" +
                                  ": zarr_format must be 2 or 3, got " + zf->dump());
    }
    from_metadata = *n == 3 ? ZarrFormat::kV3 : ZarrFormat::kV2;
  }
  if (parsed->format && from_metadata && *parsed->format != *from_metadata) {
    return InvalidArgumentError("creating array `" + std::string(url) +
                                "`: the URL's driver and the metadata's zarr_format disagree");
  }
  std::optional<ZarrFormat> format = parsed->format ? parsed->format : from_metadata;
  if (!format) {
    return InvalidArgumentError("creating array `" + std::string(url) +
                                "`: say the format with a `|zarr3:` or `|zarr2:` part or a "
                                "zarr_format member");
  }
  auto store = OpenKvStore(parsed->kvstore_url);
  if (!store.ok()) return store.status().Annotate("creating array `" + std::string(url) + "`");
  auto array = ZarrArray::Create(*std::move(store), "", *format, metadata, options);
  if (!array.ok()) return array.status().Annotate("creating array `" + std::string(url) + "`");
  return array;
}

Result<std::shared_ptr<ZarrArray>> CreateZarrArrayFromJson(std::string_view url, std::string_view metadata_json,
                                                           const CreateOptions& options) {
  CAIRN_ASSIGN_OR_RETURN(Json metadata, ParseJson(metadata_json, "metadata"));
  return CreateZarrArray(url, metadata, options);
}

}  // namespace cairn
