#include "cairn/layout/inspect/checkpoint.h"

#include <algorithm>
#include <filesystem>

#include "cairn/layout/orbax/metadata_files.h"
#include "cairn/layout/orbax/step.h"

namespace cairn::inspect {
namespace {

namespace fs = std::filesystem;

std::string Join(const std::string& dir, std::string_view name) {
  return dir + "/" + std::string(name);
}

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

// A small JSON file parsed, or null when absent or unparseable.
Json ReadJsonFile(const std::string& path) {
  if (!orbax::IsRegularFile(path)) return nullptr;
  auto text = orbax::ReadSmallFile(path);
  if (!text.ok()) return nullptr;
  auto j = ParseJson(*text, path);
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

ItemInfo DescribeItem(const std::string& dir, const std::string& name, const Json& step_metadata) {
  ItemInfo info;
  info.name = name;
  info.dir = dir;
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
  constexpr std::string_view kFile = "file://";
  if (url.substr(0, kFile.size()) == kFile) return std::string(url.substr(kFile.size()));
  if (url.find("://") != std::string_view::npos) return std::nullopt;
  if (url.empty()) return std::nullopt;
  return std::string(url);
}

bool LooksLikeItem(const std::string& dir) {
  if (!orbax::IsDirectory(dir)) return false;
  for (std::string_view f : {orbax::kTreeMetadataFile, orbax::kOcdbtManifestFile,
                             orbax::kShardingFile}) {
    if (orbax::IsRegularFile(Join(dir, f))) return true;
  }
  if (orbax::IsDirectory(Join(dir, orbax::kArrayMetadatasDir))) return true;
  auto names = orbax::ListDirectory(dir);
  if (!names.ok()) return false;
  return std::any_of(names->begin(), names->end(), [&](const std::string& n) {
    return n.rfind(orbax::kProcessSubdirPrefix, 0) == 0 && orbax::IsDirectory(Join(dir, n));
  });
}

Result<CheckpointKind> ClassifyCheckpoint(const std::string& path) {
  if (!orbax::IsDirectory(path)) return NotFoundError(path + " is not a directory");
  if (LooksLikeItem(path)) return CheckpointKind::kItem;
  if (orbax::IsRegularFile(Join(path, orbax::kCheckpointMetadataFile))) return CheckpointKind::kStep;
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> names, orbax::ListDirectory(path));
  for (const std::string& n : names) {
    if (!orbax::IsTmpName(n) && LooksLikeItem(Join(path, n))) return CheckpointKind::kStep;
  }
  CAIRN_ASSIGN_OR_RETURN(std::vector<StepEntry> steps, ListStepEntries(path));
  if (!steps.empty()) return CheckpointKind::kRoot;
  return NotFoundError("no Orbax checkpoint at " + path +
                       ": neither an item (_METADATA), a step (_CHECKPOINT_METADATA or an item "
                       "directory) nor a root holding steps");
}

Json ToJson(const ArrayEntry& e) {
  return {{"path", e.path}, {"dtype", std::string(DTypeName(e.dtype))},
          {"shape", e.shape}, {"chunks", e.chunks}, {"bytes", e.bytes}};
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

Result<std::vector<StepEntry>> ListStepEntries(const std::string& root) {
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> names, orbax::ListDirectory(root));
  CAIRN_ASSIGN_OR_RETURN(std::vector<orbax::StepInfo> finalized, orbax::DiscoverSteps(root));
  std::vector<StepEntry> out;
  for (const std::string& n : names) {
    const std::string path = Join(root, n);
    if (!orbax::IsDirectory(path)) continue;
    if (orbax::IsTmpName(n)) {
      if (StepNumberOf(n)) out.push_back({n, StepNumberOf(n), false});
      continue;
    }
    bool found = std::any_of(finalized.begin(), finalized.end(), [&](const orbax::StepInfo& s) {
      return fs::path(s.path).filename() == n;
    });
    if (found) out.push_back({n, StepNumberOf(n), true});
  }
  std::sort(out.begin(), out.end(), [](const StepEntry& a, const StepEntry& b) {
    return std::tie(a.step, a.name) < std::tie(b.step, b.name);
  });
  return out;
}

Result<std::vector<std::string>> ListItemNames(const std::string& step_dir) {
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> names, orbax::ListDirectory(step_dir));
  std::vector<std::string> out;
  for (const std::string& n : names) {
    if (!orbax::IsTmpName(n) && orbax::IsDirectory(Join(step_dir, n))) out.push_back(n);
  }
  return out;
}

Result<CheckpointInfo> DescribeCheckpoint(const std::string& path) {
  CheckpointInfo info;
  info.path = fs::absolute(path).lexically_normal().string();
  if (info.path.size() > 1 && info.path.back() == '/') info.path.pop_back();
  CAIRN_ASSIGN_OR_RETURN(info.kind, ClassifyCheckpoint(info.path));
  if (info.kind == CheckpointKind::kItem) {
    info.items.push_back(DescribeItem(info.path, "", nullptr));
    return info;
  }
  if (info.kind == CheckpointKind::kRoot) {
    CAIRN_ASSIGN_OR_RETURN(info.steps, ListStepEntries(info.path));
    info.root_metadata = ReadJsonFile(Join(info.path, "metadata/_ROOT_METADATA"));
    for (auto it = info.steps.rbegin(); it != info.steps.rend(); ++it) {
      if (it->finalized) {
        info.step_dir = Join(info.path, it->name);
        break;
      }
    }
    if (info.step_dir.empty()) return info;
  } else {
    info.step_dir = info.path;
  }
  info.step_metadata = ReadJsonFile(Join(info.step_dir, orbax::kCheckpointMetadataFile));
  CAIRN_ASSIGN_OR_RETURN(std::vector<std::string> items, ListItemNames(info.step_dir));
  for (const std::string& name : items) {
    info.items.push_back(DescribeItem(Join(info.step_dir, name), name, info.step_metadata));
  }
  return info;
}

Json ToJson(const CheckpointInfo& info) {
  Json steps = Json::array();
  for (const StepEntry& s : info.steps) {
    steps.push_back({{"name", s.name},
                     {"step", s.step ? Json(*s.step) : Json(nullptr)},
                     {"finalized", s.finalized}});
  }
  Json items = Json::array();
  for (const ItemInfo& it : info.items) {
    Json arrays = Json::array();
    for (const ArrayEntry& a : it.arrays) arrays.push_back(ToJson(a));
    Json j = {{"name", it.name},          {"dir", it.dir},
              {"handler", it.handler},    {"pytree", it.is_pytree},
              {"variant", it.variant},    {"custom_metadata", it.custom_metadata},
              {"num_arrays", it.arrays.size()}, {"total_bytes", it.total_bytes},
              {"arrays", arrays}};
    if (!it.error.empty()) j["error"] = it.error;
    items.push_back(std::move(j));
  }
  Json j = {{"path", info.path}, {"kind", CheckpointKindName(info.kind)}, {"items", items}};
  if (info.kind == CheckpointKind::kRoot) {
    j["steps"] = steps;
    j["root_metadata"] = info.root_metadata;
  }
  if (!info.step_dir.empty()) {
    j["step_dir"] = info.step_dir;
    j["step_metadata"] = info.step_metadata;
  }
  return j;
}

}  // namespace cairn::inspect
