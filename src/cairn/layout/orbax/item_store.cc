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

#include <filesystem>

#include "cairn/kvstore/file/file_kvstore.h"
#include "cairn/kvstore/ocdbt/io/merge.h"
#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"
#include "cairn/layout/orbax/step.h"

namespace cairn::orbax {
namespace fs = std::filesystem;
namespace {

ocdbt::OcdbtOptions OrbaxOcdbtOptions() {
  ocdbt::OcdbtOptions o;
  o.config.manifest_kind = ocdbt::ManifestKind::kSingle;
  o.config.max_inline_value_bytes = 1024;
  o.config.max_decoded_node_bytes = 100000000;
  return o;
}

std::string Absolute(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::absolute(path, ec);
  std::string s = (ec ? fs::path(path) : p).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

Result<std::shared_ptr<KvStore>> OpenOcdbtAt(const std::string& dir) {
  return ocdbt::OpenOcdbtKvStore(std::make_shared<FileKvStore>(dir), OrbaxOcdbtOptions());
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

Result<std::shared_ptr<KvStore>> OpenItemWriteStore(const std::string& item_dir, bool use_ocdbt,
                                                    int process_index, int process_count) {
  std::string dir = Absolute(item_dir);
  if (!use_ocdbt) return std::shared_ptr<KvStore>(std::make_shared<FileKvStore>(dir));
  return OpenOcdbtAt(dir + "/" + std::string(kProcessSubdirPrefix) + std::to_string(process_index));
}

Status BuildRootDatabase(const std::string& item_dir, int process_count) {
  std::string dir = Absolute(item_dir);
  std::vector<std::string> children;
  for (int p = 0; p < process_count; ++p) {
    std::string name = std::string(kProcessSubdirPrefix) + std::to_string(p);
    // A process that wrote no chunks has no database.
    if (IsRegularFile(dir + "/" + name + "/" + std::string(kOcdbtManifestFile))) children.push_back(name);
  }
  if (children.empty()) return Status::OK();
  return ocdbt::MergeOcdbtDatabases(std::make_shared<FileKvStore>(dir), children, OrbaxOcdbtOptions())
      .Annotate("merging the process databases of " + dir);
}

Result<OrbaxItem> OpenItem(const std::string& item_dir) {
  OrbaxItem item;
  item.dir = Absolute(item_dir);
  std::string md_path = item.dir + "/" + std::string(kTreeMetadataFile);
  auto text = ReadSmallFile(md_path);
  if (!text.ok()) {
    return NotFoundError("no Orbax PyTree item at " + item.dir + ": cannot read " +
                         std::string(kTreeMetadataFile) + " (" + std::string(text.status().message()) + ")");
  }
  CAIRN_ASSIGN_OR_RETURN(item.metadata, ParseTreeMetadata(*text, md_path));
  bool has_manifest = IsRegularFile(item.dir + "/" + std::string(kOcdbtManifestFile));
  item.use_ocdbt = item.metadata.use_ocdbt.value_or(has_manifest);
  item.use_zarr3 = item.metadata.use_zarr3;
  if (item.use_ocdbt && !has_manifest) {
    return NotFoundError(item.dir + ": _METADATA says use_ocdbt but there is no " +
                         std::string(kOcdbtManifestFile) + " (an unfinished or unmerged save)");
  }
  auto side = [&](std::string_view name) -> Result<std::optional<std::string>> {
    std::string path = item.dir + "/" + std::string(name);
    if (!IsRegularFile(path)) return std::optional<std::string>();
    CAIRN_ASSIGN_OR_RETURN(std::string t, ReadSmallFile(path));
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
  std::string am_dir = item.dir + "/" + std::string(kArrayMetadatasDir);
  if (IsDirectory(am_dir)) {
    CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> files, ListDirectory(am_dir));
    for (const std::string& f : files) {
      if (f.rfind("process_", 0) != 0) continue;
      std::string path = am_dir + "/" + f;
      CAIRN_ASSIGN_OR_RETURN(std::string t, ReadSmallFile(path));
      CAIRN_ASSIGN_OR_RETURN(auto records, ParseArrayMetadatas(t, path));
      for (auto& r : records) item.array_metadatas.emplace(r.param_name, std::move(r));
    }
  }
  if (item.use_ocdbt) {
    CAIRN_ASSIGN_OR_RETURN(item.store, OpenOcdbtAt(item.dir));
  } else {
    item.store = std::make_shared<FileKvStore>(item.dir);
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

Result<std::string> ResolveItemDirectory(const std::string& path, const std::string& item_name) {
  std::string dir = Absolute(path);
  if (!IsDirectory(dir)) return NotFoundError("checkpoint " + dir + " is not a directory");
  auto is_item = [](const std::string& d) { return IsRegularFile(d + "/" + std::string(kTreeMetadataFile)); };
  if (is_item(dir)) return dir;
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> names, ListDirectory(dir));
  std::vector<std::string> items;
  for (const std::string& n : names) {
    if (!IsTmpName(n) && is_item(dir + "/" + n)) items.push_back(n);
  }
  if (!items.empty()) {
    std::vector<std::string> wanted = {item_name};
    if (item_name.empty()) wanted = {"default", "state"};
    for (const std::string& want : wanted) {
      for (const std::string& n : items) {
        if (n == want) return dir + "/" + n;
      }
    }
    if (!item_name.empty()) return NotFoundError("step " + dir + " has no item `" + item_name + "`");
    if (items.size() == 1) return dir + "/" + items[0];
    std::string list;
    for (const std::string& n : items) list += (list.empty() ? "" : ", ") + n;
    return InvalidArgumentError("step " + dir + " holds several items (" + list + "); name one");
  }
  CAIRN_ASSIGN_OR_RETURN(std::vector<StepInfo> steps, DiscoverSteps(dir));
  if (steps.empty()) {
    return NotFoundError(dir + " is neither an Orbax item, a step directory, nor a root with finalized steps");
  }
  return ResolveItemDirectory(steps.back().path, item_name);
}

}  // namespace cairn::orbax
