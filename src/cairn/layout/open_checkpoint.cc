#include "cairn/layout/open_checkpoint.h"

#include <algorithm>

#include "cairn/kvstore/file/file_url.h"
#include "cairn/kvstore/url.h"
#include "cairn/layout/axlearn/axlearn_checkpoint.h"
#include "cairn/layout/orbax/item_store.h"
#include "cairn/layout/orbax/orbax_reader.h"
#include "cairn/layout/safetensors/safetensors_reader.h"

namespace cairn::layout {
namespace {

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string WithSlash(std::string p) {
  if (!p.empty() && p.back() != '/') p += '/';
  return p;
}

bool HasKey(const std::vector<KeyInfo>& keys, const std::string& key) {
  return std::any_of(keys.begin(), keys.end(), [&](const KeyInfo& k) { return k.key == key; });
}

// "step_00000100" -> 100; nullopt for anything else.
std::optional<int64_t> ParseAxlearnStepDir(std::string_view name) {
  if (name.size() != 13 || name.substr(0, 5) != "step_") return std::nullopt;
  int64_t v = 0;
  for (char c : name.substr(5)) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

// Keys under `dir` whose first component after `dir` starts with
// `first_component_prefix`, as {key, key relative to `strip`}.
Status CollectIteratorFiles(KvStore& store, const std::string& dir,
                            std::string_view first_component_prefix, const std::string& strip,
                            std::vector<std::pair<std::string, std::string>>& out) {
  auto keys = store.List(dir + std::string(first_component_prefix));
  if (!keys.ok()) return keys.status().Annotate("listing " + store.Describe(dir));
  for (const KeyInfo& k : *keys) {
    if (k.key.find('/', dir.size()) == std::string::npos) continue;  // a file, not a directory
    out.emplace_back(k.key, k.key.substr(strip.size()));
  }
  return Status::OK();
}

// The step of an Orbax item from its step directory's name ("7",
// "step_7", "step_00000007"), when it has one.
std::optional<int64_t> StepOfItemDirectory(const std::string& item_dir) {
  std::string dir = item_dir;
  while (!dir.empty() && dir.back() == '/') dir.pop_back();
  size_t slash = dir.rfind('/');
  if (slash == std::string::npos) return std::nullopt;
  dir.resize(slash);
  std::string name = dir.substr(dir.rfind('/') + 1);
  size_t underscore = name.rfind('_');
  if (underscore != std::string::npos) name = name.substr(underscore + 1);
  if (name.empty() || name.size() > 18) return std::nullopt;
  int64_t v = 0;
  for (char c : name) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + (c - '0');
  }
  return v;
}

// Orbax checkpoints of file stores are opened by path (OpenLocation: the
// user's symlinks resolved, messages name local paths); those of other plain
// stores (memory, s3, gs) at the prefix of the store itself.
Result<OpenedCheckpoint> OpenOrbax(const std::shared_ptr<KvStore>& store, const std::string& prefix,
                                   std::optional<int64_t> step) {
  const std::string url = store->url();
  if (url.find('|') != std::string::npos) {
    return Status(StatusCode::kUnimplemented,
                  "Orbax checkpoints are read from a plain store (a directory or a " + KvStoreDriverUrlForms() +
                      " URL), not from the pipeline " + url);
  }
  const std::optional<std::string> file_path = FileUrlPath(url);
  OpenedCheckpoint out;
  out.format = "orbax";
  orbax::Location location;
  if (file_path) {
    std::string path = *file_path + prefix;
    if (step) path = WithSlash(path) + std::to_string(*step);
    CAIRN_ASSIGN_OR_RETURN(location, orbax::OpenLocation(path));
  } else {
    std::string key_prefix = WithSlash(prefix);
    if (step) key_prefix += std::to_string(*step) + "/";
    if (!key_prefix.empty()) {
      CAIRN_RETURN_IF_ERROR(ValidatePrefix(key_prefix, "Orbax checkpoint location", false));
    }
    location = orbax::LocationInStore(store, key_prefix);
  }
  // AXLearn's Orbax steps keep the tensors in the `state` item, beside
  // `index/index` and the iterator state; a step with several items is
  // taken as one of them.
  auto resolved = orbax::ResolveItemLocation(location, "");
  if (!resolved.ok() && resolved.status().code() == StatusCode::kInvalidArgument) {
    resolved = orbax::ResolveItemLocation(location, "state");
  }
  CAIRN_RETURN_IF_ERROR(resolved.status());
  const orbax::Location item_location = std::move(*resolved);
  // The step directory as a key prefix of `store` (the item's parent, when
  // it lies inside the store).
  std::optional<std::string> step_dir;
  if (!file_path) {
    step_dir = item_location.Parent().prefix;
  } else {
    const std::string& store_root = *file_path;
    const std::string step_path = item_location.Parent().Path() + "/";
    if (step_path.size() > store_root.size() && step_path.rfind(store_root, 0) == 0) {
      step_dir = step_path.substr(store_root.size());
    }
  }
  if (step_dir) {
    auto index = axlearn::ReadIndex(*store, *step_dir + "index/");
    if (index.ok()) {
      out.axlearn_index = std::move(*index);
      CAIRN_RETURN_IF_ERROR(CollectIteratorFiles(*store, *step_dir + "tfds/", "tf_",
                                                 *step_dir + "tfds/", out.iterator_files));
      CAIRN_RETURN_IF_ERROR(CollectIteratorFiles(*store, *step_dir + "python/", "python_",
                                                 *step_dir + "python/", out.iterator_files));
    }
  }
  const std::string item_dir = item_location.Path();
  CAIRN_ASSIGN_OR_RETURN(orbax::OrbaxItem item, orbax::OpenItem(item_location));
  CAIRN_ASSIGN_OR_RETURN(out.reader, orbax::NewOrbaxReader(std::move(item)));
  out.location = item_dir;
  if (out.axlearn_index) {
    out.step = out.axlearn_index->step;
  } else {
    out.step = StepOfItemDirectory(item_dir);
  }
  return out;
}

Result<OpenedCheckpoint> OpenAxlearn(std::shared_ptr<KvStore> store, std::string prefix,
                                     std::optional<int64_t> step,
                                     const std::vector<KeyInfo>& keys) {
  prefix = WithSlash(prefix);
  std::string step_prefix = prefix;
  if (!HasKey(keys, prefix + std::string(axlearn::kIndexFile)) || step) {
    CAIRN_ASSIGN_OR_RETURN(std::vector<int64_t> steps, ListAxlearnSteps(*store, prefix));
    if (steps.empty()) {
      return Status(StatusCode::kNotFound,
                    "no committed AXLearn step (step_XXXXXXXX/index) at " + store->Describe(prefix));
    }
    int64_t chosen = steps.back();
    if (step) {
      if (!std::binary_search(steps.begin(), steps.end(), *step)) {
        return Status(StatusCode::kNotFound, "no committed AXLearn step " + std::to_string(*step) +
                                                 " at " + store->Describe(prefix));
      }
      chosen = *step;
    }
    step_prefix = prefix + axlearn::StepDirName(chosen) + "/";
  }
  OpenedCheckpoint out;
  out.format = "axlearn";
  out.location = store->url() + step_prefix;
  CAIRN_ASSIGN_OR_RETURN(axlearn::StepIndex index, axlearn::ReadIndex(*store, step_prefix));
  out.step = index.step;
  out.axlearn_index = std::move(index);
  CAIRN_RETURN_IF_ERROR(
      CollectIteratorFiles(*store, step_prefix, "tf_", step_prefix, out.iterator_files));
  CAIRN_RETURN_IF_ERROR(
      CollectIteratorFiles(*store, step_prefix, "python_", step_prefix, out.iterator_files));
  CAIRN_ASSIGN_OR_RETURN(out.reader, axlearn::OpenReader(store, step_prefix));
  return out;
}

}  // namespace

Result<std::vector<int64_t>> ListAxlearnSteps(KvStore& store, const std::string& prefix) {
  auto keys = store.List(prefix);
  if (!keys.ok()) return keys.status().Annotate("listing " + store.Describe(prefix));
  std::vector<int64_t> steps;
  for (const KeyInfo& k : *keys) {
    std::string_view rest = std::string_view(k.key).substr(prefix.size());
    size_t slash = rest.find('/');
    if (slash == std::string_view::npos || rest.substr(slash + 1) != axlearn::kIndexFile) continue;
    if (auto s = ParseAxlearnStepDir(rest.substr(0, slash))) steps.push_back(*s);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

namespace {

// The keys under `location` (none for a file).
Result<std::vector<KeyInfo>> KeysAt(KvStore& store, const std::string& location, bool is_file) {
  if (is_file) return std::vector<KeyInfo>();
  auto listed = store.List(WithSlash(location));
  if (!listed.ok()) return listed.status().Annotate("listing " + store.Describe(location));
  return std::move(*listed);
}

bool IsFileLocation(const std::string& location) {
  return EndsWith(location, ".safetensors") || EndsWith(location, ".json");
}

// DetectFormat over the keys listed.
std::string DetectFrom(KvStore& store, const std::string& location, bool is_file,
                       const std::vector<KeyInfo>& keys) {
  const std::string dir = WithSlash(location);
  const bool safetensors = is_file || std::any_of(keys.begin(), keys.end(), [&](const KeyInfo& k) {
    return EndsWith(k.key, ".safetensors") && k.key.find('/', dir.size()) == std::string::npos;
  });
  if (safetensors) return "safetensors";
  if (HasKey(keys, dir + std::string(axlearn::kIndexFile))) return "axlearn";
  auto axlearn_steps = ListAxlearnSteps(store, dir);
  if (axlearn_steps.ok() && !axlearn_steps->empty()) return "axlearn";
  return "orbax";
}

}  // namespace

Result<std::string> DetectFormat(KvStore& store, const std::string& location) {
  const bool is_file = IsFileLocation(location);
  CAIRN_ASSIGN_OR_RETURN(std::vector<KeyInfo> keys, KeysAt(store, location, is_file));
  return DetectFrom(store, location, is_file, keys);
}

Result<OpenedCheckpoint> OpenCheckpoint(std::shared_ptr<KvStore> store, std::string location,
                                        std::string_view format, std::optional<int64_t> step) {
  if (format == "orbax") return OpenOrbax(store, location, step);
  const bool is_file = IsFileLocation(location);
  CAIRN_ASSIGN_OR_RETURN(std::vector<KeyInfo> keys, KeysAt(*store, location, is_file));
  if (!format.empty() && format != "safetensors" && format != "axlearn") {
    return Status(StatusCode::kInvalidArgument,
                  "unknown checkpoint format `" + std::string(format) +
                      "` (known: safetensors, axlearn, orbax)");
  }
  const std::string detected = format.empty() ? DetectFrom(*store, location, is_file, keys) : std::string(format);
  if (detected == "safetensors") {
    OpenedCheckpoint out;
    out.format = "safetensors";
    out.location = store->url() + location;
    CAIRN_ASSIGN_OR_RETURN(out.reader, safetensors::OpenReader(store, location, &out.metadata));
    return out;
  }
  if (detected == "axlearn") return OpenAxlearn(store, location, step, keys);
  auto orbax = OpenOrbax(store, location, step);
  if (orbax.ok() || orbax.status().code() != StatusCode::kNotFound) return orbax;
  return Status(StatusCode::kNotFound,
                "no checkpoint at " + store->Describe(location) +
                    ": found no safetensors files, no AXLearn index and no Orbax item (" +
                    std::string(orbax.status().message()) + ")");
}

}  // namespace cairn::layout
