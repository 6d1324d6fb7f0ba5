// BuildRootDatabase protocol (the root database of an OCDBT item):
//   1. Every process has committed its own `ocdbt.process_<i>` database
//      (data files, then its manifest) before the primary gets here.
//   2. MergeOcdbtDatabases writes one generation of the root database under
//      the item directory whose leaves refer into the process databases'
//      data files (no value is copied): new B+tree nodes first, the root
//      `manifest.ocdbt` last.
//   3. The process databases are kept: the root refers into them.
// Until the item is committed (renamed / commit_success.txt) no reader
// looks at the root.
#include "cairn/layout/orbax/item_store.h"

#include <algorithm>

#include "cairn/kvstore/listing_memo_kvstore.h"
#include "cairn/kvstore/ocdbt/io/merge.h"
#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"
#include "cairn/layout/orbax/step.h"

namespace cairn::orbax {
namespace {

ocdbt::OcdbtOptions OrbaxOcdbtOptions() {
  ocdbt::OcdbtOptions o;
  o.config.manifest_kind = ocdbt::ManifestKind::kSingle;
  o.config.max_inline_value_bytes = 1024;
  o.config.max_decoded_node_bytes = 100000000;
  return o;
}

Result<std::shared_ptr<KvStore>> OpenOcdbtAt(const Location& dir) {
  return ocdbt::OpenOcdbtKvStore(dir.View(), OrbaxOcdbtOptions());
}

}  // namespace

const char* StorageVariantName(StorageVariant v) {
  switch (v) {
    case StorageVariant::kOcdbtZarr3: return "ocdbt+zarr3";
    case StorageVariant::kOcdbtZarr2: return "ocdbt+zarr2";
    case StorageVariant::kDirZarr3: return "zarr3";
    case StorageVariant::kDirZarr2: return "zarr2";
  }
  return "unknown";
}

StorageVariant OrbaxItem::variant() const {
  if (use_ocdbt) return use_zarr3 ? StorageVariant::kOcdbtZarr3 : StorageVariant::kOcdbtZarr2;
  return use_zarr3 ? StorageVariant::kDirZarr3 : StorageVariant::kDirZarr2;
}

Result<std::shared_ptr<KvStore>> OpenItemWriteStore(const Location& item, bool use_ocdbt,
                                                    int process_index, int process_count,
                                                    uint64_t value_alignment) {
  (void)process_count;
  return OpenItemWriteStore(item, use_ocdbt, std::to_string(process_index), value_alignment);
}

Result<std::shared_ptr<KvStore>> OpenItemWriteStore(const Location& item, bool use_ocdbt,
                                                    const std::string& process_name,
                                                    uint64_t value_alignment) {
  if (!use_ocdbt) return item.View();
  ocdbt::OcdbtOptions o = OrbaxOcdbtOptions();
  o.value_alignment = value_alignment;
  return ocdbt::OpenOcdbtKvStore(item.Child(std::string(kProcessSubdirPrefix) + process_name).View(), o);
}

Status BuildRootDatabase(const Location& item, int process_count) {
  std::vector<std::string> names;
  for (int p = 0; p < process_count; ++p) names.push_back(std::to_string(p));
  return BuildRootDatabase(item, names);
}

Status BuildRootDatabase(const Location& item, const std::vector<std::string>& process_names) {
  std::vector<std::string> children;
  for (const std::string& p : process_names) {
    std::string name = std::string(kProcessSubdirPrefix) + p;
    // A process that wrote no chunks has no database.
    if (HasKey(item.Child(name), kOcdbtManifestFile)) children.push_back(name);
  }
  if (children.empty()) return Status::OK();
  return ocdbt::MergeOcdbtDatabases(item.View(), children, OrbaxOcdbtOptions())
      .Annotate("merging the process databases of " + item.Path());
}

Result<OrbaxItem> OpenItem(const Location& location) {
  OrbaxItem item;
  item.location = location;
  item.dir = location.Path();
  std::string md_path = item.dir + "/" + std::string(kTreeMetadataFile);
  // The item directory is listed once; every file below is read knowing
  // its kind from this listing (on an object store: a listing and two
  // requests per file, no listing per file).
  auto listed = ListEntries(location);
  if (!listed.ok()) {
    return NotFoundError("no Orbax PyTree item at " + item.dir + ": cannot list it (" +
                         std::string(listed.status().message()) + ")");
  }
  const std::vector<ChildEntry>& entries = *listed;
  auto text = ReadListedSmallFile(location, kTreeMetadataFile, entries);
  if (!text.ok() && text.status().code() == StatusCode::kResourceExhausted) return text.status();
  if (!text.ok()) {
    return NotFoundError("no Orbax PyTree item at " + item.dir + ": cannot read " +
                         std::string(kTreeMetadataFile) + " (" + std::string(text.status().message()) + ")");
  }
  CAIRN_ASSIGN_OR_RETURN(item.metadata, ParseTreeMetadata(*text, md_path));
  auto has = [&](std::string_view name, ChildEntry::Kind kind) {
    return std::any_of(entries.begin(), entries.end(),
                       [&](const ChildEntry& e) { return e.name == name && e.kind == kind; });
  };
  bool has_manifest = has(kOcdbtManifestFile, ChildEntry::Kind::kKey);
  item.use_ocdbt = item.metadata.use_ocdbt.value_or(has_manifest);
  item.use_zarr3 = item.metadata.use_zarr3;
  if (item.use_ocdbt && !has_manifest) {
    return NotFoundError(item.dir + ": _METADATA says use_ocdbt but there is no " +
                         std::string(kOcdbtManifestFile) + " (an unfinished or unmerged save)");
  }
  auto side = [&](std::string_view name) -> Result<std::optional<std::string>> {
    if (!has(name, ChildEntry::Kind::kKey)) return std::optional<std::string>();
    CAIRN_ASSIGN_OR_RETURN(std::string t, ReadListedSmallFile(location, name, entries));
    return std::optional<std::string>(std::move(t));
  };
  CAIRN_ASSIGN_OR_RETURN(auto strings_text, side(kStringsFile));
  if (strings_text) {
    CAIRN_ASSIGN_OR_RETURN(item.strings, ParseStringsFile(*strings_text, item.dir + "/_strings.json"));
  }
  CAIRN_ASSIGN_OR_RETURN(auto sharding_text, side(kShardingFile));
  if (sharding_text) {
    CAIRN_ASSIGN_OR_RETURN(item.shardings, ParseShardingFile(*sharding_text, item.dir + "/_sharding"));
  }
  if (has(kArrayMetadatasDir, ChildEntry::Kind::kPrefix)) {
    const Location am_dir = location.Child(kArrayMetadatasDir);
    CAIRN_ASSIGN_OR_RETURN(std::vector<ChildEntry> files, ListEntries(am_dir));
    for (const ChildEntry& file : files) {
      const std::string& f = file.name;
      if (f.rfind("process_", 0) != 0 || file.kind != ChildEntry::Kind::kKey) continue;
      std::string path = am_dir.Path() + "/" + f;
      CAIRN_ASSIGN_OR_RETURN(std::string t, ReadListedSmallFile(am_dir, f, files));
      CAIRN_ASSIGN_OR_RETURN(auto records, ParseArrayMetadatas(t, path));
      for (auto& r : records) item.array_metadatas.emplace(r.param_name, std::move(r));
    }
  }
  if (item.use_ocdbt) {
    // Pinned to the generation that is the latest now: the manifest is read
    // once for everything read through this item (every array's metadata
    // and chunks), and all of it comes from one generation.
    CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<KvStore> db, OpenOcdbtAt(location));
    auto* ocdbt_store = dynamic_cast<ocdbt::OcdbtKvStore*>(db.get());
    if (ocdbt_store == nullptr) return InternalError(item.dir + ": the OCDBT opener returned another store");
    CAIRN_ASSIGN_OR_RETURN(item.store, ocdbt_store->PinLatest());
  } else {
    item.store = location.View();
  }
  return item;
}

Result<std::shared_ptr<ZarrArray>> OpenItemArray(const OrbaxItem& item, const std::string& param) {
  ZarrFormat first = item.use_zarr3 ? ZarrFormat::kV3 : ZarrFormat::kV2;
  ZarrFormat second = item.use_zarr3 ? ZarrFormat::kV2 : ZarrFormat::kV3;
  std::string prefix = param.empty() ? "" : param + "/";
  auto a = ZarrArray::Open(item.store, prefix, first);
  if (a.ok() || a.status().code() != StatusCode::kNotFound) {
    if (!a.ok()) return a.status().Annotate("array `" + param + "` of Orbax item " + item.dir);
    return a;
  }
  auto b = ZarrArray::Open(item.store, prefix, second);
  if (!b.ok() && b.status().code() == StatusCode::kNotFound) {
    return NotFoundError("array `" + param + "` of Orbax item " + item.dir +
                         " has no zarr.json or .zarray");
  }
  if (!b.ok()) return b.status().Annotate("array `" + param + "` of Orbax item " + item.dir);
  return b;
}

namespace {
Result<Location> ResolveListed(const Location& location, const std::string& item_name);
}  // namespace

// Resolving looks at the same directories several times (whether the
// location exists, is an item, holds items, holds steps; then the same for
// the latest step): through a listing memo each is listed once.
Result<Location> ResolveItemLocation(const Location& location, const std::string& item_name) {
  Location memo = location;
  memo.store = std::make_shared<ListingMemoKvStore>(location.store);
  CAIRN_ASSIGN_OR_RETURN(Location found, ResolveListed(memo, item_name));
  found.store = location.store;
  return found;
}

namespace {
Result<Location> ResolveListed(const Location& location, const std::string& item_name) {
  const std::string dir = location.Path();
  if (!Exists(location)) return NotFoundError("checkpoint " + dir + " is not a directory");
  auto is_item = [](const Location& l) { return HasKey(l, kTreeMetadataFile); };
  if (is_item(location)) return location;
  CAIRN_ASSIGN_OR_RETURN(std::vector<ChildEntry> entries, ListEntries(location));
  std::vector<std::string> items;
  for (const ChildEntry& e : entries) {
    if (e.kind == ChildEntry::Kind::kPrefix && !IsTmpName(e.name) && is_item(location.Child(e.name))) {
      items.push_back(e.name);
    }
  }
  if (!items.empty()) {
    std::vector<std::string> wanted = {item_name};
    if (item_name.empty()) wanted = {"default", "state"};
    for (const std::string& want : wanted) {
      for (const std::string& n : items) {
        if (n == want) return location.Child(n);
      }
    }
    if (!item_name.empty()) return NotFoundError("step " + dir + " has no item `" + item_name + "`");
    if (items.size() == 1) return location.Child(items[0]);
    std::string list;
    for (const std::string& n : items) list += (list.empty() ? "" : ", ") + n;
    return InvalidArgumentError("step " + dir + " holds several items (" + list + "); name one");
  }
  CAIRN_ASSIGN_OR_RETURN(std::vector<StepInfo> steps, DiscoverSteps(location));
  if (steps.empty()) {
    return NotFoundError(dir + " is neither an Orbax item, a step directory, nor a root with finalized steps");
  }
  return ResolveListed(steps.back().location, item_name);
}
}  // namespace

}  // namespace cairn::orbax
