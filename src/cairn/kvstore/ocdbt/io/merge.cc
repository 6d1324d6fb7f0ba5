#include "cairn/kvstore/ocdbt/io/merge.h"

#include <algorithm>
#include <set>

#include "cairn/kvstore/prefix/prefix_kvstore.h"

namespace cairn::ocdbt {
namespace {

constexpr std::string_view kProcessDirPrefix = "ocdbt.process_";

bool IsProcessId(std::string_view id) {
  if (id.empty()) return false;
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

// One leaf entry of a child, placed relative to the root.
struct Placed {
  BtreeMutation entry;
  size_t child;
};

}  // namespace

Result<std::vector<std::string>> FindProcessDatabases(KvStore& root_base) {
  CAIRN_ASSIGN_OR_RETURN(auto keys, root_base.List(kProcessDirPrefix));
  std::vector<std::string> dirs;
  for (const auto& k : keys) {
    std::string_view key = k.key;
    size_t slash = key.find('/');
    if (slash == std::string_view::npos || key.substr(slash + 1) != kManifestKey) continue;
    if (!IsProcessId(key.substr(kProcessDirPrefix.size(), slash - kProcessDirPrefix.size()))) {
      continue;
    }
    dirs.emplace_back(key.substr(0, slash + 1));
  }
  return dirs;
}

Status MergeOcdbtDatabases(std::shared_ptr<KvStore> root_base,
                           const std::vector<std::string>& child_dirs,
                           const OcdbtOptions& root_options) {
  if (!root_base) return InvalidArgumentError("merging OCDBT databases: no root base store");
  const std::string where = "merging OCDBT databases into " + root_base->url() + "|ocdbt:";
  if (child_dirs.empty()) return InvalidArgumentError(where + ": no child databases given");
  std::vector<std::string> dirs;
  std::set<std::string> seen;
  for (const std::string& d : child_dirs) {
    std::string dir = d;
    while (!dir.empty() && dir.back() == '/') dir.pop_back();
    Status valid = ValidateKey(dir);
    if (!valid.ok()) {
      return InvalidArgumentError(where + ": child directory `" + d + "`: " +
                                  std::string(valid.message()));
    }
    dir += '/';
    if (!seen.insert(dir).second) {
      return InvalidArgumentError(where + ": child directory `" + dir + "` given twice");
    }
    dirs.push_back(std::move(dir));
  }

  std::vector<Placed> placed;
  for (size_t c = 0; c < dirs.size(); ++c) {
    auto child_base = std::make_shared<PrefixKvStore>(root_base, dirs[c]);
    OcdbtOptions child_options;
    OcdbtKvStore child(child_base, child_options);
    std::string child_where = where + ": child " + child.url();
    auto manifest_or = child.ReadManifest();
    if (!manifest_or.ok()) return manifest_or.status().Annotate(child_where);
    std::optional<Manifest> manifest = std::move(manifest_or).value();
    if (!manifest || manifest->versions.empty()) continue;
    const BtreeGenerationReference& latest = manifest->versions.back();
    ReadObjectFn read = [&child_base](const DataFileId& file, uint64_t offset,
                                      uint64_t length) -> Result<Buffer> {
      std::string path = file.FullPath();
      auto got = child_base->Get(path, ByteRange::Range(offset, length));
      if (!got.ok()) {
        if (got.status().code() != StatusCode::kInvalidArgument) return got.status();
        return DataLossError(child_base->Describe(path) + ": reference outside the data file");
      }
      if (!*got || (*got)->size() != length) {
        return DataLossError("missing or short OCDBT data file " + child_base->Describe(path));
      }
      return std::move(**got);
    };
    Status listed = ListEntries(
        latest, "", read,
        [&](std::string_view key, const LeafValue& v) {
          Placed p{{std::string(key), v}, c};
          if (!v.is_inline) p.entry.value->ref.file_id.base_path.insert(0, dirs[c]);
          placed.push_back(std::move(p));
          return Status::OK();
        },
        NodeReadLimits(manifest->config, root_options.max_node_read_bytes));
    CAIRN_RETURN_IF_ERROR(listed.Annotate(child_where));
  }
  std::stable_sort(placed.begin(), placed.end(), [](const Placed& a, const Placed& b) {
    return a.entry.key < b.entry.key;
  });
  std::vector<BtreeMutation> entries;
  entries.reserve(placed.size());
  for (size_t i = 0; i < placed.size(); ++i) {
    if (i > 0 && entries.back().key == placed[i].entry.key) {
      return FailedPreconditionError(where + ": key `" + placed[i].entry.key + "` is in both " +
                                     dirs[placed[i - 1].child] + " and " +
                                     dirs[placed[i].child]);
    }
    entries.push_back(std::move(placed[i].entry));
  }
  OcdbtKvStore root(root_base, root_options);
  return root.CommitEntries(std::move(entries)).Annotate(where);
}

}  // namespace cairn::ocdbt
