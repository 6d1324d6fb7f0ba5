#include "cairn/layout/inspect/checkpoint.h"

#include <algorithm>

#include "cairn/kvstore/file/file_url.h"
#include "cairn/kvstore/url.h"
#include "cairn/layout/orbax/metadata_files.h"
#include "cairn/layout/orbax/step.h"

namespace cairn::inspect {
namespace {

using orbax::Location;

// The step number a directory name carries: trailing digits after nothing
// or after `<prefix>_`, before any `.orbax-checkpoint-tmp` suffix.
std::optional<int64_t> StepNumberOf(std::string_view name) {
  size_t tmp = name.find(orbax::kTmpSuffix);
  if (tmp != std::string_view::npos) name = name.substr(0, tmp);
  size_t digits = name.size();
  while (digits > 0 && name[digits - 1] >= '0' && name[digits - 1] <= '9') --digits;
  if (digits == name.size() || name.size() - digits > 18) return std::nullopt;
  if (digits > 0 && (digits < 2 || name[digits - 1] != '_')) return std::nullopt;
  return std::stoll(std::string(name.substr(digits)));
}

// A small JSON file parsed, or null when absent, too large or unparseable.
Json ReadJsonFile(const Location& dir, std::string_view name) {
  auto text = orbax::ReadSmallFile(dir, name);
  if (!text.ok()) return nullptr;
  auto j = ParseJson(*text, dir.Path() + "/" + std::string(name));
  return j.ok() ? *j : Json(nullptr);
}

// The handler typestr of item `name` in `_CHECKPOINT_METADATA`, or "".
std::string HandlerOf(const Json& step_metadata, const std::string& name) {
  if (!step_metadata.is_object()) return "";
  auto it = step_metadata.find("item_handlers");
  if (it == step_metadata.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto h = it->find(name);
    if (h != it->end() && h->is_string()) return h->get<std::string>();
  }
  return "";
}

ItemInfo DescribeItem(const Location& dir, const std::string& name, const Json& step_metadata) {
  ItemInfo info;
  info.name = name;
  info.dir = dir.Path();
  info.handler = HandlerOf(step_metadata, name);
  info.is_pytree = LooksLikeItem(dir);
  if (!info.is_pytree) return info;
  auto item = orbax::OpenItem(dir);
  if (!item.ok()) {
    info.error = item.status().ToString();
    return info;
  }
  info.variant = VariantName(item->variant());
  info.custom_metadata = item->metadata.custom_metadata;
  auto arrays = ListItemArrays(*item);
  if (!arrays.ok()) {
    info.error = arrays.status().ToString();
    return info;
  }
  info.arrays = std::move(*arrays);
  for (const ArrayEntry& a : info.arrays) info.total_bytes += a.bytes;
  return info;
}

}  // namespace

const char* CheckpointKindName(CheckpointKind kind) {
  switch (kind) {
    case CheckpointKind::kRoot: return "root";
    case CheckpointKind::kStep: return "step";
    case CheckpointKind::kItem: return "item";
  }
  return "unknown";
}

const char* VariantName(orbax::StorageVariant v) {
  switch (v) {
    case orbax::StorageVariant::kOcdbtZarr3: return "ocdbt+zarr3";
    case orbax::StorageVariant::kOcdbtZarr2: return "ocdbt+zarr2";
    case orbax::StorageVariant::kDirZarr3: return "dir+zarr3";
    case orbax::StorageVariant::kDirZarr2: return "dir+zarr2";
  }
  return "unknown";
}

std::optional<std::string> LocalPathOf(std::string_view url) {
  if (url.find('|') != std::string_view::npos) return std::nullopt;
  if (std::optional<std::string> path = FileUrlPath(url)) return path;
  if (url.find("://") != std::string_view::npos) return std::nullopt;
  if (url.empty()) return std::nullopt;
  return std::string(url);
}

std::optional<std::string> CheckpointPathOf(std::string_view url) {
  if (IsKvStoreDriverUrl(url) && !FileUrlPath(url)) {
    return std::string(url);
  }
  return LocalPathOf(url);
}

bool LooksLikeItem(const Location& dir) {
  auto entries = dir.store->ListChildren(dir.prefix);
  if (!entries.ok()) return false;
  for (const ChildEntry& e : *entries) {
    if (e.kind == ChildEntry::Kind::kKey &&
        (e.name == orbax::kTreeMetadataFile || e.name == orbax::kOcdbtManifestFile ||
         e.name == orbax::kShardingFile)) {
      return true;
    }
    if (e.kind == ChildEntry::Kind::kPrefix &&
        (e.name == orbax::kArrayMetadatasDir || e.name.rfind(orbax::kProcessSubdirPrefix, 0) == 0)) {
      return true;
    }
  }
  return false;
}

Result<CheckpointKind> ClassifyCheckpoint(const Location& loc) {
  const std::string path = loc.Path();
  if (!orbax::Exists(loc)) return NotFoundError(path + " is not a directory");
  if (LooksLikeItem(loc)) return CheckpointKind::kItem;
  CAIRN_ASSIGN_OR_RETURN(std::vector<ChildEntry> entries, orbax::ListEntries(loc));
  for (const ChildEntry& e : entries) {
    if (e.kind == ChildEntry::Kind::kKey && e.name == orbax::kCheckpointMetadataFile) return CheckpointKind::kStep;
  }
  for (const ChildEntry& e : entries) {
    if (e.kind == ChildEntry::Kind::kPrefix && !orbax::IsTmpName(e.name) && LooksLikeItem(loc.Child(e.name))) {
      return CheckpointKind::kStep;
    }
  }
  CAIRN_ASSIGN_OR_RETURN(std::vector<StepEntry> steps, ListStepEntries(loc));
  if (!steps.empty()) return CheckpointKind::kRoot;
  return NotFoundError("no Orbax checkpoint at " + path +
                       ": neither an item (_METADATA), a step (_CHECKPOINT_METADATA or an item "
                       "directory) nor a root holding steps");
}

Result<std::vector<ArrayEntry>> ListItemArrays(const orbax::OrbaxItem& item,
                                               const std::string& path_prefix) {
  std::vector<ArrayEntry> out;
  for (const orbax::TreeEntry& entry : item.metadata.entries) {
    if (!orbax::IsArrayValueType(entry.value.value_type)) continue;
    const std::string param = orbax::ParamName(entry.path);
    const std::string where = "array `" + param + "` of " + item.dir;
    CAIRN_ASSIGN_OR_RETURN(std::shared_ptr<ZarrArray> array,
                           orbax::OpenItemArray(item, param));
    auto keys = item.store->List(param + "/");
    if (!keys.ok()) return keys.status().Annotate("listing " + where);
    ArrayEntry e;
    e.path = path_prefix + param;
    e.dtype = array->dtype();
    e.shape = array->shape();
    e.chunks = array->metadata().chunk_shape;
    for (const KeyInfo& k : *keys) e.bytes += k.size;
    out.push_back(std::move(e));
  }
  return out;
}

Result<std::vector<StepEntry>> ListStepEntries(const Location& root) {
  CAIRN_ASSIGN_OR_RETURN(std::vector<ChildEntry> entries, orbax::ListEntries(root));
  CAIRN_ASSIGN_OR_RETURN(std::vector<orbax::StepInfo> finalized, orbax::DiscoverSteps(root));
  std::vector<StepEntry> out;
  for (const ChildEntry& e : entries) {
    const std::string& n = e.name;
    if (e.kind != ChildEntry::Kind::kPrefix) continue;
    if (orbax::IsTmpName(n)) {
      if (StepNumberOf(n)) out.push_back({n, StepNumberOf(n), false});
      continue;
    }
    bool found = std::any_of(finalized.begin(), finalized.end(), [&](const orbax::StepInfo& s) {
      return s.location.Name() == n;
    });
    if (found) out.push_back({n, StepNumberOf(n), true});
  }
  std::sort(out.begin(), out.end(), [](const StepEntry& a, const StepEntry& b) {
    return std::tie(a.step, a.name) < std::tie(b.step, b.name);
  });
  return out;
}

Result<std::vector<std::string>> ListItemNames(const Location& step) {
  CAIRN_ASSIGN_OR_RETURN(std::vector<ChildEntry> entries, orbax::ListEntries(step));
  std::vector<std::string> out;
  for (const ChildEntry& e : entries) {
    if (!orbax::IsTmpName(e.name) && e.kind == ChildEntry::Kind::kPrefix) out.push_back(e.name);
  }
  return out;
}

Result<CheckpointInfo> DescribeCheckpoint(const Location& loc) {
  CheckpointInfo info;
  info.location = loc;
  info.path = loc.Path();
  CAIRN_ASSIGN_OR_RETURN(info.kind, ClassifyCheckpoint(loc));
  if (info.kind == CheckpointKind::kItem) {
    info.items.push_back(DescribeItem(loc, "", nullptr));
    return info;
  }
  if (info.kind == CheckpointKind::kRoot) {
    CAIRN_ASSIGN_OR_RETURN(info.steps, ListStepEntries(loc));
    info.root_metadata = ReadJsonFile(loc.Child("metadata"), "_ROOT_METADATA");
    for (auto it = info.steps.rbegin(); it != info.steps.rend(); ++it) {
      if (it->finalized) {
        info.step_location = loc.Child(it->name);
        break;
      }
    }
    if (!info.step_location.store) return info;
  } else {
    info.step_location = loc;
  }
  info.step_dir = info.step_location.Path();
  info.step_metadata = ReadJsonFile(info.step_location, orbax::kCheckpointMetadataFile);
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> items, ListItemNames(info.step_location));
  for (const std::string& name : items) {
    info.items.push_back(DescribeItem(info.step_location.Child(name), name, info.step_metadata));
  }
  return info;
}

}  // namespace cairn::inspect
