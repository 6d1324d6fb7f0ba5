#include "cairn/kvstore/url.h"

#include <cctype>
#include <cstdint>

#include "cairn/kvstore/file/file_kvstore.h"
#include "cairn/kvstore/gcs/gcs_kvstore.h"
#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"
#include "cairn/kvstore/prefix/prefix_kvstore.h"
#include "cairn/kvstore/s3/s3_kvstore.h"

namespace cairn {
namespace {

Status BadUrl(std::string_view url, std::string_view why) {
  return InvalidArgumentError("invalid kvstore URL `" + std::string(url.substr(0, 300)) + "`: " +
                              std::string(why));
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes %XX escapes. InvalidArgument for a malformed escape or a NUL byte.
Result<std::string> PercentDecode(std::string_view s, std::string_view url) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '%') {
      out += s[i];
      continue;
    }
    if (i + 2 >= s.size()) return BadUrl(url, "truncated %-escape");
    int hi = HexValue(s[i + 1]);
    int lo = HexValue(s[i + 2]);
    if (hi < 0 || lo < 0) return BadUrl(url, "malformed %-escape");
    char c = static_cast<char>(hi * 16 + lo);
    if (c == '\0') return BadUrl(url, "%00 in path");
    out += c;
    i += 2;
  }
  return out;
}

}  // namespace

Result<std::string> UrlPathToKeyPrefix(std::string_view encoded, std::string_view url) {
  CAIRN_ASSIGN_OR_RETURN(std::string path, PercentDecode(encoded, url));
  if (path.empty()) return path;
  if (path.back() != '/') path += '/';
  Status valid = ValidateFileKey(path.substr(0, path.size() - 1));
  if (!valid.ok()) return BadUrl(url, "path `" + path + "`: " + std::string(valid.message()));
  return path;
}

namespace {

// ---- Drivers: the first part of a pipeline, "<scheme>://<rest>". ----------

Result<std::shared_ptr<KvStore>> OpenMemory(std::string_view rest, std::string_view url) {
  CAIRN_ASSIGN_OR_RETURN(std::string prefix, UrlPathToKeyPrefix(rest, url));
  std::shared_ptr<KvStore> base = MemoryKvStore::Default();
  return MakePrefixKvStore(std::move(base), prefix, "memory://" + prefix);
}

Result<std::shared_ptr<KvStore>> OpenFile(std::string_view rest, std::string_view url) {
  if (rest.empty() || rest.front() != '/') {
    return BadUrl(url, "a file URL needs an absolute path: file:///abs/dir/");
  }
  CAIRN_ASSIGN_OR_RETURN(std::string path, PercentDecode(rest, url));
  std::string_view inner = path;
  while (!inner.empty() && inner.front() == '/') inner.remove_prefix(1);
  while (!inner.empty() && inner.back() == '/') inner.remove_suffix(1);
  if (!inner.empty()) {
    Status valid = ValidateFileKey(inner);
    if (!valid.ok()) return BadUrl(url, "path: " + std::string(valid.message()));
  }
  return std::shared_ptr<KvStore>(std::make_shared<FileKvStore>(path));
}

// `s3://bucket/path/`: objects of an S3 bucket below path; endpoint, region
// and credentials from the environment (s3/s3_kvstore.h).
Result<std::shared_ptr<KvStore>> OpenS3(std::string_view rest, std::string_view url) {
  size_t slash = rest.find('/');
  std::string_view bucket = rest.substr(0, slash);
  Status valid = s3::ValidateBucketName(bucket);
  if (!valid.ok()) return BadUrl(url, valid.message());
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  CAIRN_ASSIGN_OR_RETURN(std::string prefix, UrlPathToKeyPrefix(path, url));
  CAIRN_ASSIGN_OR_RETURN(s3::S3Options options,
                         s3::S3Options::FromEnvironment(std::string(bucket), std::move(prefix)));
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<s3::S3KvStore> store, s3::S3KvStore::Open(std::move(options)));
  return std::shared_ptr<KvStore>(std::move(store));
}

// `gs://bucket/path/`: objects of a GCS bucket below path; endpoint
// (STORAGE_EMULATOR_HOST) from the environment (gcs/gcs_kvstore.h).
Result<std::shared_ptr<KvStore>> OpenGcs(std::string_view rest, std::string_view url) {
  size_t slash = rest.find('/');
  std::string_view bucket = rest.substr(0, slash);
  Status valid = gcs::ValidateGcsBucketName(bucket);
  if (!valid.ok()) return BadUrl(url, valid.message());
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  CAIRN_ASSIGN_OR_RETURN(std::string prefix, UrlPathToKeyPrefix(path, url));
  CAIRN_ASSIGN_OR_RETURN(gcs::GcsOptions options,
                         gcs::GcsOptions::FromEnvironment(std::string(bucket), std::move(prefix)));
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<gcs::GcsKvStore> store, gcs::GcsKvStore::Open(std::move(options)));
  return std::shared_ptr<KvStore>(std::move(store));
}

struct Driver {
  std::string_view scheme;
  Result<std::shared_ptr<KvStore>> (*open)(std::string_view rest, std::string_view url);
};

// Every driver scheme cairn opens.
constexpr Driver kDrivers[] = {
    {"memory", OpenMemory},
    {"file", OpenFile},
    {"s3", OpenS3},
    {"gs", OpenGcs},
};

// ---- Adapters: later parts of a pipeline, "<scheme>:<path>". ---------------

struct Adapter {
  std::string_view scheme;
  Result<std::shared_ptr<KvStore>> (*open)(std::shared_ptr<KvStore> base, std::string_view path,
                                           std::string_view url);
};

// Percent-encodes a key prefix for printing in an OCDBT URL, as TensorStore
// does: a literal '@' (which would start a version), '%', spaces, control
// and non-ASCII bytes become %XX.
std::string EncodeOcdbtPath(std::string_view path) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  static constexpr std::string_view kKept = "-._~!$&'()*+,;=:/";
  std::string out;
  for (char c : path) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u) != 0 && u < 0x80) {
      out += c;
    } else if (kKept.find(c) != std::string_view::npos) {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
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
    return BadUrl(url, "invalid OCDBT version `" + std::string(version) +
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
    return BadUrl(url, "invalid OCDBT generation number `" + std::string(version) +
                           "`: expected `v` and a decimal number from 1 to 2^64-1");
  }
  return generation;
}

// `<base>|ocdbt:[@v<generation>/][path]`: the OCDBT database stored in
// `base`, rooted at `path`; with a version, that generation, read-only. A
// database created through a URL gets TensorStore's default config.
Result<std::shared_ptr<KvStore>> OpenOcdbtAdapter(std::shared_ptr<KvStore> base,
                                                  std::string_view path, std::string_view url) {
  ocdbt::OcdbtOptions options;
  if (!path.empty() && path[0] == '@') {
    size_t slash = path.find('/');
    std::string_view version = path.substr(1, slash == std::string_view::npos
                                                  ? std::string_view::npos
                                                  : slash - 1);
    CAIRN_ASSIGN_OR_RETURN(options.generation, ParseOcdbtVersion(version, url));
    path = slash == std::string_view::npos ? std::string_view() : path.substr(slash + 1);
  }
  CAIRN_ASSIGN_OR_RETURN(std::string prefix, UrlPathToKeyPrefix(path, url));
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<KvStore> db,
                         ocdbt::OpenOcdbtKvStore(std::move(base), options));
  if (prefix.empty()) return db;
  std::string name = db->url() + EncodeOcdbtPath(prefix);
  return MakePrefixKvStore(std::move(db), prefix, std::move(name));
}

// Every kvstore adapter cairn applies over the store built so far.
constexpr Adapter kAdapters[] = {
    {"ocdbt", OpenOcdbtAdapter},
};

Result<std::shared_ptr<KvStore>> ApplyAdapter(std::shared_ptr<KvStore> base,
                                              std::string_view part, std::string_view url) {
  size_t colon = part.find(':');
  if (colon == std::string_view::npos || colon == 0) {
    return BadUrl(url, "expected `<adapter>:[path]`, got `" + std::string(part) + "`");
  }
  std::string_view scheme = part.substr(0, colon);
  for (const Adapter& a : kAdapters) {
    if (a.open != nullptr && a.scheme == scheme) {
      return a.open(std::move(base), part.substr(colon + 1), url);
    }
  }
  return BadUrl(url, "unknown kvstore adapter `" + std::string(scheme) + ":`");
}

}  // namespace

Result<std::vector<std::string>> SplitUrlPipeline(std::string_view url) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t bar = url.find('|', start);
    std::string_view part =
        url.substr(start, bar == std::string_view::npos ? std::string_view::npos : bar - start);
    if (part.empty()) return BadUrl(url, "empty part in the `|` pipeline");
    parts.emplace_back(part);
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  return parts;
}

Result<std::shared_ptr<KvStore>> OpenKvStore(std::string_view url) {
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> parts, SplitUrlPipeline(url));
  const std::string& first = parts[0];
  size_t sep = first.find("://");
  if (sep == std::string::npos || sep == 0) {
    return BadUrl(url, "expected `<scheme>://...` as the first part");
  }
  std::string_view scheme = std::string_view(first).substr(0, sep);
  std::string_view rest = std::string_view(first).substr(sep + 3);
  if (rest.find_first_of("?#") != std::string_view::npos) {
    return BadUrl(url, "query strings and fragments are not supported");
  }
  const Driver* driver = nullptr;
  for (const Driver& d : kDrivers) {
    if (d.scheme == scheme) driver = &d;
  }
  if (driver == nullptr) return BadUrl(url, "unknown kvstore scheme `" + std::string(scheme) + "`");
  CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<KvStore> store, driver->open(rest, url));
  for (size_t i = 1; i < parts.size(); ++i) {
    CAIRN_ASSIGN_OR_RETURN(store, ApplyAdapter(std::move(store), parts[i], url));
  }
  return store;
}

}  // namespace cairn
