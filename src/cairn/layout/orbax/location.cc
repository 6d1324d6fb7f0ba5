#include "cairn/layout/orbax/location.h"

#include "cairn/kvstore/file/file_kvstore.h"
#include "cairn/kvstore/file/file_url.h"
#include "cairn/kvstore/prefix/prefix_kvstore.h"
#include "cairn/kvstore/url.h"
#include "cairn/util/hex.h"

namespace cairn::orbax {
namespace {

Result<Location> OpenLocalPath(const std::string& path) {
  if (path.empty()) return InvalidArgumentError("an empty path names no checkpoint");
  std::string abs = ResolvedUserPath(path);
  if (abs == "/") {
    CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<KvStore> root, OpenKvStore(FileUrlOfPath("/")));
    return Location{std::move(root), "", "/"};
  }
  size_t slash = abs.rfind('/');
  std::string parent = slash == 0 ? "/" : abs.substr(0, slash);
  std::string name = abs.substr(slash + 1);
  CAIRN_RETURN_IF_ERROR(ValidateFileKey(name).Annotate("path " + Printable(path)));
  auto store = OpenKvStore(FileUrlOfPath(parent));
  if (!store.ok()) return store.status().Annotate("path " + Printable(path));
  return Location{std::move(*store), name + "/", parent};
}

}  // namespace

Location LocationInStore(std::shared_ptr<KvStore> store, std::string prefix) {
  std::string base = store->url();
  const bool in_place = store->Capabilities().commits_in_place;
  return Location{std::move(store), std::move(prefix), std::move(base), in_place};
}

Location Location::Child(std::string_view name) const {
  return Location{store, prefix + std::string(name) + "/", base, commits_in_place};
}

std::string Location::Name() const {
  if (prefix.empty()) return "";
  std::string_view p(prefix);
  p.remove_suffix(1);
  return std::string(p.substr(p.rfind('/') + 1));
}

Location Location::Parent() const {
  if (prefix.empty()) return *this;
  std::string_view p(prefix);
  p.remove_suffix(1);
  size_t slash = p.rfind('/');
  return Location{store, slash == std::string_view::npos ? "" : std::string(p.substr(0, slash + 1)), base,
                  commits_in_place};
}

std::string Location::Path() const {
  if (prefix.empty()) return base;
  std::string out = base;
  if (out.empty() || out.back() != '/') out += '/';
  out += std::string_view(prefix).substr(0, prefix.size() - 1);
  return out;
}

std::shared_ptr<KvStore> Location::View() const {
  return MakePrefixKvStore(store, prefix, store->url() + prefix);
}

Result<Location> OpenLocation(std::string_view path_or_url) {
  std::string s(path_or_url);
  if (s.find('|') != std::string::npos) {
    return InvalidArgumentError("`" + s + "`: an Orbax checkpoint location must be a plain path or " +
                                KvStoreDriverUrlForms() + " URL, not a pipeline");
  }
  if (std::optional<std::string> rest = FileUrlPath(s)) {
    if (rest->empty() || (*rest)[0] != '/') {
      return InvalidArgumentError("`" + s + "`: a file URL needs an absolute path (" + FileUrl("/abs/dir") + ")");
    }
    CAIRN_ASSIGN_OR_RETURN(std::string decoded, UrlPathToKeyPrefix(rest->substr(1), s));
    return OpenLocalPath("/" + decoded);
  }
  if (IsKvStoreDriverUrl(s)) {
    // The store is opened at the parent of the named directory by the
    // kvstore URL opener (object stores: endpoint, region and credentials
    // from the environment); whether it commits in place, it answers.
    CAIRN_ASSIGN_OR_RETURN(ParentKvStore parent, OpenParentKvStore(s));
    const bool in_place = parent.store->Capabilities().commits_in_place;
    return Location{std::move(parent.store), std::move(parent.name), std::move(parent.url), in_place};
  }
  if (s.find("://") != std::string::npos) {
    return InvalidArgumentError("`" + s + "`: unsupported scheme for an Orbax checkpoint location "
                                "(use a path, " + KvStoreDriverUrlForms() + ")");
  }
  return OpenLocalPath(s);
}

Result<std::vector<ChildEntry>> ListEntries(const Location& loc) {
  auto r = loc.store->ListChildren(loc.prefix);
  if (!r.ok()) return r.status().Annotate("listing " + loc.Path());
  return r;
}

namespace {
bool HasChild(const Location& loc, std::string_view name, ChildEntry::Kind kind) {
  auto entries = loc.store->ListChildren(loc.prefix);
  if (!entries.ok()) return false;
  for (const ChildEntry& e : *entries) {
    if (e.name == name && e.kind == kind) return true;
  }
  return false;
}
}  // namespace

bool HasKey(const Location& loc, std::string_view name) { return HasChild(loc, name, ChildEntry::Kind::kKey); }
bool HasPrefix(const Location& loc, std::string_view name) {
  return HasChild(loc, name, ChildEntry::Kind::kPrefix);
}

bool Exists(const Location& loc) {
  if (loc.prefix.empty()) return true;
  return HasPrefix(loc.Parent(), loc.Name());
}

namespace {
// The bounded read of ReadSmallFile once the key's kind is known to be a
// plain key (or unknown): its listed size, then the value.
Result<std::string> ReadBoundedKey(const Location& loc, const std::string& key, uint64_t max_bytes) {
  auto too_big = [&](uint64_t size) {
    return ResourceExhaustedError("reading " + loc.store->Describe(key) + ": " + std::to_string(size) +
                                  " bytes or more, over the limit of " + std::to_string(max_bytes) +
                                  " bytes for a metadata file");
  };
  CAIRN_ASSIGN_OR_RETURN(std::vector<KeyInfo> listed, loc.store->List(key));
  for (const KeyInfo& k : listed) {
    if (k.key == key && k.size > max_bytes) return too_big(k.size);
  }
  // Bounded as it is received: a server's endless body is not held.
  Result<std::optional<Buffer>> value = loc.store->GetAtMost(key, max_bytes);
  if (!value.ok() && value.status().code() == StatusCode::kResourceExhausted) {
    return ResourceExhaustedError(std::string(value.status().message()) + " (the limit for a metadata file)");
  }
  CAIRN_RETURN_IF_ERROR(value.status());
  if (!*value) return NotFoundError(loc.store->Describe(key) + " does not exist");
  if ((*value)->size() > max_bytes) return too_big((*value)->size());
  return (*value)->ToString();
}

Status NotARegularFile(const Location& loc, const std::string& key) {
  return FailedPreconditionError("reading " + loc.store->Describe(key) +
                                 ": not a regular file (a symbolic link, FIFO or device)");
}
}  // namespace

Result<std::string> ReadSmallFile(const Location& loc, std::string_view name, uint64_t max_bytes) {
  const std::string key = loc.Key(name);
  // Only a plain key is read: a FIFO would block and a device would not end
  // (stores that have neither report kKey or nothing).
  {
    const size_t slash = key.rfind('/');
    const std::string parent = slash == std::string::npos ? "" : key.substr(0, slash + 1);
    const std::string base = key.substr(parent.size());
    CAIRN_ASSIGN_OR_RETURN(std::vector<ChildEntry> siblings, loc.store->ListChildren(parent));
    for (const ChildEntry& e : siblings) {
      if (e.name == base && e.kind == ChildEntry::Kind::kOther) return NotARegularFile(loc, key);
    }
  }
  return ReadBoundedKey(loc, key, max_bytes);
}

Result<std::string> ReadListedSmallFile(const Location& loc, std::string_view name,
                                        const std::vector<ChildEntry>& listed, uint64_t max_bytes) {
  const std::string key = loc.Key(name);
  bool is_key = false;
  for (const ChildEntry& e : listed) {
    if (e.name != name) continue;
    if (e.kind == ChildEntry::Kind::kOther) return NotARegularFile(loc, key);
    if (e.kind == ChildEntry::Kind::kKey) is_key = true;
  }
  if (!is_key) return NotFoundError(loc.store->Describe(key) + " does not exist");
  return ReadBoundedKey(loc, key, max_bytes);
}

Status WriteSmallFile(const Location& loc, std::string_view name, std::string_view contents) {
  return loc.store->Put(loc.Key(name), AsBytes(contents));
}

}  // namespace cairn::orbax
