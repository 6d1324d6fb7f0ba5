#include "cairn/layout/inspect/verify.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <optional>

#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"
#include "cairn/kvstore/ocdbt/io/reader.h"
#include "cairn/layout/inspect/checkpoint.h"
#include "cairn/layout/inspect/chunk_grid.h"
#include "cairn/layout/orbax/item_store.h"
#include "cairn/layout/orbax/metadata_files.h"
#include "cairn/layout/orbax/step.h"
#include "cairn/util/thread_pool.h"
#include "cairn/zarr/chunk_check.h"
#include "cairn/zarr/shard_io.h"
#include "cairn/zarr/stored_chunks.h"

namespace cairn::inspect {
namespace {

using orbax::Location;

// Directory nesting the entry walk follows; deeper is reported.
constexpr int kMaxWalkDepth = 64;

std::string Join(const std::string& dir, std::string_view name) {
  return dir + "/" + std::string(name);
}

class Verifier {
 public:
  Verifier(VerifyReport& report, const VerifyOptions& options)
      : report_(report), options_(options) {}

  void Add(Problem p) { report_.problems.push_back(std::move(p)); }

  // Step 0 of verify.h: every entry below `loc` that is neither a key nor
  // a directory is a problem; remembers where they are.
  void WalkEntries(const Location& loc, int depth);
  // Step 1-3 of verify.h for one item directory.
  void VerifyItem(const Location& dir, bool expect_pytree);
  // Every item of a step directory, and its uncommitted items.
  Status VerifyStep(const Location& step);

  uint64_t total_ = 0;  // decoded bytes to check, for progress
  uint64_t done_ = 0;

 private:
  // Walks the OCDBT databases of an item: the root one (filling key_files_,
  // key -> data file) and every `ocdbt.process_<i>/`.
  void VerifyOcdbt(const orbax::OrbaxItem& item);
  // Walks the database stored in `db_dir`: manifest, version tree, every
  // B+tree node, every reference. `keys` (when not null) gets key -> file.
  void VerifyOcdbtDatabase(const Location& db, std::map<std::string, std::string>* keys);
  void VerifyArray(const orbax::OrbaxItem& item, const std::string& param);
  // Reads and decodes one chunk; a problem when damaged (nullopt when fine).
  std::optional<Problem> CheckChunk(const orbax::OrbaxItem& item, const ZarrArray& array,
                                    const std::string& param, const std::string& key,
                                    bool require_all, uint64_t* stored_bytes) const;
  std::string FileOf(const orbax::OrbaxItem& item, const std::string& key) const {
    if (!item.use_ocdbt) return Join(item.dir, key);
    auto it = key_files_.find(key);
    return it == key_files_.end() ? Join(item.dir, "manifest.ocdbt") : Join(item.dir, it->second);
  }

  // True when an entry WalkEntries reported lies inside `dir`.
  bool HoldsHostileEntry(const std::string& dir) const {
    const std::string prefix = dir + "/";
    for (const std::string& p : hostile_) {
      if (p.rfind(prefix, 0) == 0) return true;
    }
    return false;
  }

  VerifyReport& report_;
  const VerifyOptions& options_;
  std::map<std::string, std::string> key_files_;
  std::vector<std::string> hostile_;  // paths of non-regular entries found
};

void Verifier::WalkEntries(const Location& loc, int depth) {
  auto entries = loc.store->ListChildren(loc.prefix);
  if (!entries.ok()) {
    Add({"unreadable", "", "", loc.Path(), entries.status().ToString()});
    hostile_.push_back(loc.Path() + "/");
    return;
  }
  for (const ChildEntry& e : *entries) {
    const std::string path = Join(loc.Path(), e.name);
    if (e.kind == ChildEntry::Kind::kOther) {
      Add({"not_a_regular_file", "", "", path,
           "neither a regular file nor a directory (a symbolic link, FIFO, socket or device): "
           "cairn does not follow or read it"});
      hostile_.push_back(path);
    } else if (e.kind == ChildEntry::Kind::kPrefix) {
      if (depth >= kMaxWalkDepth) {
        Add({"too_deep", "", "", path,
             "directories nested deeper than " + std::to_string(kMaxWalkDepth) + " levels"});
        hostile_.push_back(path);
        continue;
      }
      WalkEntries(loc.Child(e.name), depth + 1);
    }
  }
}

void Verifier::VerifyOcdbt(const orbax::OrbaxItem& item) {
  key_files_.clear();
  VerifyOcdbtDatabase(item.location, &key_files_);
  auto entries = item.location.store->ListChildren(item.location.prefix);
  if (!entries.ok()) return;
  for (const ChildEntry& e : *entries) {
    if (e.name.rfind(orbax::kProcessSubdirPrefix, 0) == 0 && e.kind == ChildEntry::Kind::kPrefix) {
      VerifyOcdbtDatabase(item.location.Child(e.name), nullptr);
    }
  }
}

void Verifier::VerifyOcdbtDatabase(const Location& db_loc, std::map<std::string, std::string>* keys) {
  const std::string db_dir = db_loc.Path();
  const std::string manifest_file = Join(db_dir, ocdbt::kManifestKey);
  if (!orbax::HasKey(db_loc, ocdbt::kManifestKey)) {
    Add({"ocdbt_manifest", "", "", manifest_file, "the OCDBT manifest is missing"});
    return;
  }
  auto opened = ocdbt::OpenOcdbtKvStore(db_loc.View());
  if (!opened.ok()) {
    Add({"ocdbt_manifest", "", "", manifest_file, opened.status().ToString()});
    return;
  }
  auto* db = dynamic_cast<ocdbt::OcdbtKvStore*>(opened->get());
  if (db == nullptr) return;
  auto manifest = db->ReadManifest();
  if (!manifest.ok() || !manifest->has_value()) {
    Add({"ocdbt_manifest", "", "", manifest_file,
         manifest.ok() ? "the database is empty" : manifest.status().ToString()});
    return;
  }
  std::shared_ptr<KvStore> base = db->base();
  auto files = base->List("");
  if (!files.ok()) {
    Add({"ocdbt_manifest", "", "", db_dir, files.status().ToString()});
    return;
  }
  std::map<std::string, uint64_t> sizes;
  for (const KeyInfo& k : *files) sizes[k.key] = k.size;
  // Every node and value reference is checked against the file sizes before
  // it is read, so a short file is named as such.
  auto check_ref = [&](const ocdbt::DataFileId& file, uint64_t offset,
                       uint64_t length) -> std::optional<Problem> {
    const std::string path = file.FullPath();
    auto it = sizes.find(path);
    if (it == sizes.end()) {
      return Problem{"missing_data_file", "", "", Join(db_dir, path),
                     "OCDBT data file is missing"};
    }
    if (offset > it->second || length > it->second - offset) {
      return Problem{"truncated_data_file", "", "", Join(db_dir, path),
                     "OCDBT data file has " + std::to_string(it->second) +
                         " bytes; a reference needs bytes [" + std::to_string(offset) + ", " +
                         std::to_string(offset + length) + ")"};
    }
    return std::nullopt;
  };
  std::optional<Problem> ref_problem;
  ocdbt::ReadObjectFn read = [&](const ocdbt::DataFileId& file, uint64_t offset,
                                 uint64_t length) -> Result<Buffer> {
    if (auto p = check_ref(file, offset, length)) {
      ref_problem = p;
      return DataLossError(p->message + ": " + p->file);
    }
    auto got = base->Get(file.FullPath(), ByteRange::Range(offset, length));
    if (!got.ok()) return got.status();
    if (!got->has_value()) return DataLossError("missing OCDBT data file " + file.FullPath());
    return std::move(**got);
  };
  auto root = ocdbt::FindGeneration(**manifest, 0, read);
  if (!root.ok() || !root->has_value()) {
    if (ref_problem) {
      Add(*ref_problem);
    } else {
      Add({"ocdbt_node", "", "", manifest_file,
           root.ok() ? "no latest generation" : root.status().ToString()});
    }
    return;
  }
  Status walked = ocdbt::ListEntries(
      **root, "", read, [&](std::string_view key, const ocdbt::LeafValue& value) -> Status {
        if (value.is_inline) return Status::OK();
        const ocdbt::IndirectDataReference& r = value.ref;
        if (keys != nullptr) (*keys)[std::string(key)] = r.file_id.FullPath();
        if (auto p = check_ref(r.file_id, r.offset, r.length)) {
          p->key = std::string(key);
          Add(std::move(*p));
        }
        return Status::OK();
      });
  if (!walked.ok()) {
    if (ref_problem) {
      Add(*ref_problem);
    } else {
      Add({"ocdbt_node", "", "", db_dir, "reading the OCDBT B+tree: " + walked.ToString()});
    }
  }
}

std::optional<Problem> Verifier::CheckChunk(const orbax::OrbaxItem& item, const ZarrArray& array,
                                            const std::string& param, const std::string& key,
                                            bool require_all, uint64_t* stored_bytes) const {
  auto stored = item.store->Get(key);
  if (!stored.ok()) {
    return Problem{"corrupt_chunk", param, key, FileOf(item, key), stored.status().ToString()};
  }
  if (*stored) *stored_bytes = (*stored)->size();
  // The zarr layer's check (zarr/chunk_check.h), the same for every format.
  const ChunkCheck check = CheckStoredChunk(array.metadata(), *stored, require_all);
  if (check.ok()) return std::nullopt;
  return Problem{ChunkCheckKindName(check.kind), param, key, FileOf(item, key), check.message};
}

void Verifier::VerifyArray(const orbax::OrbaxItem& item, const std::string& param) {
  auto array = orbax::OpenItemArray(item, param);
  if (!array.ok()) {
    Add({"bad_array", param, param + "/", item.dir, array.status().ToString()});
    return;
  }
  ++report_.arrays;
  const ArrayMetadata& md = (*array)->metadata();
  const std::string prefix = param + "/";
  // The chunks actually stored, from one listing: the work is bounded by
  // them, never by the chunk count the metadata declares.
  auto chunks = ListStoredChunks(*item.store, prefix, md);
  if (!chunks.ok()) {
    Add({"unreadable", param, prefix, FileOf(item, prefix), chunks.status().ToString()});
    return;
  }
  if (chunks->cells == 0) return;
  const bool require_all = item.metadata.store_array_data_equal_to_fill_value;
  const uint64_t chunk_bytes = md.chunk_spec().num_bytes();
  const size_t workers = ThreadPool::Default().size();
  const size_t max_problems = options_.max_problems_per_array;
  // The first problems in row-major order, with the cell each concerns.
  std::vector<std::pair<GridCell, Problem>> damaged;
  uint64_t damaged_count = 0;
  const std::vector<GridCell>& stored = chunks->stored;
  for (size_t begin = 0; begin < stored.size(); begin += workers) {
    // One batch: one chunk per worker.
    const size_t n = std::min(workers, stored.size() - begin);
    std::vector<std::optional<Problem>> results(n);
    std::vector<uint64_t> sizes(n, 0);
    TaskGroup group;
    for (size_t i = 0; i < n; ++i) {
      group.Run([&, i] {
        const std::string key = prefix + (*array)->ChunkKey(stored[begin + i]);
        results[i] = CheckChunk(item, **array, param, key, require_all, &sizes[i]);
        return Status::OK();
      });
    }
    group.Wait().IgnoreError();  // jobs report through `results`
    for (size_t i = 0; i < n; ++i) {
      ++report_.chunks;
      report_.bytes_read += sizes[i];
      if (!results[i]) continue;
      if (++damaged_count <= max_problems) damaged.emplace_back(stored[begin + i], std::move(*results[i]));
    }
    done_ += chunk_bytes * n;
    if (options_.progress) options_.progress(done_, total_);
  }
  // Missing chunks: the first few named, the rest counted (never walked).
  const uint64_t missing_count = require_all ? chunks->missing() : 0;
  std::vector<std::pair<GridCell, Problem>> missing;
  if (missing_count > 0) {
    const ChunkCheck absent = CheckStoredChunk(md, std::nullopt, /*require_all=*/true);
    for (GridCell& cell : FirstMissingCells(*chunks, max_problems)) {
      const std::string key = prefix + (*array)->ChunkKey(cell);
      missing.emplace_back(std::move(cell), Problem{ChunkCheckKindName(absent.kind), param, key,
                                                    FileOf(item, key), absent.message});
    }
  }
  std::vector<std::pair<GridCell, Problem>> merged(damaged.size() + missing.size());
  std::merge(std::make_move_iterator(damaged.begin()), std::make_move_iterator(damaged.end()),
             std::make_move_iterator(missing.begin()), std::make_move_iterator(missing.end()),
             merged.begin(), [](const auto& a, const auto& b) { return a.first < b.first; });
  size_t listed_missing = 0;
  for (size_t i = 0; i < merged.size() && i < max_problems; ++i) {
    if (merged[i].second.kind == "missing_chunk") ++listed_missing;
    Add(std::move(merged[i].second));
  }
  const uint64_t found = damaged_count + missing_count;
  if (found > max_problems) {
    std::string message = std::to_string(found - max_problems) + " more damaged or missing chunks in this array";
    if (missing_count > listed_missing) message += "; " + DescribeMissing(*chunks, md);
    Add({"more", param, "", item.dir, std::move(message)});
  }
  // The missing chunks count as checked, for progress.
  const uint64_t absent_bytes =
      chunks->missing() > UINT64_MAX / std::max<uint64_t>(chunk_bytes, 1) ? UINT64_MAX : chunks->missing() * chunk_bytes;
  done_ = absent_bytes > UINT64_MAX - done_ ? UINT64_MAX : done_ + absent_bytes;
  if (options_.progress) options_.progress(std::min(done_, total_), total_);
}

void Verifier::VerifyItem(const Location& loc, bool expect_pytree) {
  if (!LooksLikeItem(loc) && !expect_pytree) return;
  ++report_.items;
  const std::string dir = loc.Path();
  if (HoldsHostileEntry(dir)) {
    Add({"not_verified", "", "", dir,
         "the item holds entries that are not regular files or directories (reported above); "
         "its data is not read"});
    return;
  }
  const std::string md_file = Join(dir, orbax::kTreeMetadataFile);
  if (!orbax::HasKey(loc, orbax::kTreeMetadataFile)) {
    Add({"missing_metadata", "", "", md_file,
         "the item has no _METADATA: Orbax cannot restore it"});
    return;
  }
  auto item = orbax::OpenItem(loc);
  if (!item.ok()) {
    Add({"bad_metadata", "", "", dir, item.status().ToString()});
    return;
  }
  if (item->use_ocdbt) VerifyOcdbt(*item);
  for (const orbax::TreeEntry& e : item->metadata.entries) {
    if (orbax::IsArrayValueType(e.value.value_type)) VerifyArray(*item, orbax::ParamName(e.path));
  }
}

Status Verifier::VerifyStep(const Location& step) {
  const std::string step_dir = step.Path();
  CAIRN_ASSIGN_OR_RETURN(std::vector<ChildEntry> entries, orbax::ListEntries(step));
  Json handlers;
  const bool metadata_readable =
      std::find(hostile_.begin(), hostile_.end(), Join(step_dir, orbax::kCheckpointMetadataFile)) == hostile_.end();
  if (auto text = metadata_readable ? orbax::ReadSmallFile(step, orbax::kCheckpointMetadataFile)
                                    : Result<std::string>(FailedPreconditionError("not a regular file"));
      text.ok()) {
    if (auto j = ParseJson(*text, step_dir); j.ok() && j->is_object()) {
      if (const Json* h = FindField(*j, "item_handlers")) handlers = *h;
    }
  } else if (text.status().code() == StatusCode::kResourceExhausted) {
    Add({"bad_metadata", "", "", Join(step_dir, orbax::kCheckpointMetadataFile), text.status().ToString()});
  }
  for (const ChildEntry& entry : entries) {
    const std::string& n = entry.name;
    const std::string dir = Join(step_dir, n);
    if (entry.kind != ChildEntry::Kind::kPrefix) continue;
    if (orbax::IsTmpName(n)) {
      Add({"uncommitted", "", "", dir, "uncommitted item directory (an interrupted save)"});
      continue;
    }
    // An item the step metadata gives a PyTree handler must be a PyTree item.
    std::string handler;
    if (handlers.is_object()) {
      if (const Json* h = FindField(handlers, n); h != nullptr && h->is_string()) {
        handler = h->get<std::string>();
      }
    }
    const bool pytree_handler = handler == orbax::kPyTreeHandler || handler == orbax::kStandardHandler;
    VerifyItem(step.Child(n), pytree_handler);
  }
  return Status::OK();
}

// Decoded bytes of every array under the items to verify, for progress.
uint64_t DecodedBytesOf(const std::vector<Location>& item_dirs) {
  uint64_t total = 0;
  for (const Location& dir : item_dirs) {
    auto item = orbax::OpenItem(dir);
    if (!item.ok()) continue;
    for (const orbax::TreeEntry& e : item->metadata.entries) {
      if (!orbax::IsArrayValueType(e.value.value_type)) continue;
      auto array = orbax::OpenItemArray(*item, orbax::ParamName(e.path));
      if (!array.ok()) continue;
      const ArrayMetadata& md = (*array)->metadata();
      // Saturating: a hostile shape may declare more than 2^64 bytes.
      const uint64_t cells = NumCells(ChunkGridShape(md));
      const uint64_t bytes = std::max<uint64_t>(md.chunk_spec().num_bytes(), 1);
      const uint64_t array_bytes = cells > UINT64_MAX / bytes ? UINT64_MAX : cells * bytes;
      total = array_bytes > UINT64_MAX - total ? UINT64_MAX : total + array_bytes;
    }
  }
  return total;
}

}  // namespace

Result<VerifyReport> VerifyCheckpoint(const Location& loc, const VerifyOptions& options) {
  VerifyReport report;
  const std::string path = loc.Path();
  report.path = path;
  CAIRN_ASSIGN_OR_RETURN(CheckpointKind kind, ClassifyCheckpoint(loc));
  Verifier v(report, options);
  v.WalkEntries(loc, 0);
  // The item and step directories to check.
  std::vector<Location> steps;
  if (kind == CheckpointKind::kRoot) {
    CAIRN_ASSIGN_OR_RETURN(std::vector<StepEntry> entries, ListStepEntries(loc));
    for (const StepEntry& s : entries) {
      if (s.finalized) {
        steps.push_back(loc.Child(s.name));
      } else {
        // What a manager makes of it: ignored, removed when one next opens
        // the root (engine/checkpoint_manager.cc).
        const std::string which = s.step ? "step " + std::to_string(*s.step) : "step directory " + s.name;
        report.warnings.push_back(
            {"uncommitted", "", "", Join(path, s.name),
             which + " was never committed (left by an interrupted save); a CheckpointManager "
                     "ignores it and deletes it when it next opens this root"});
      }
    }
  } else if (kind == CheckpointKind::kStep) {
    steps.push_back(loc);
  }
  std::vector<Location> item_dirs;
  if (kind == CheckpointKind::kItem) item_dirs.push_back(loc);
  for (const Location& s : steps) {
    auto names = ListItemNames(s);
    if (!names.ok()) continue;
    for (const std::string& n : *names) item_dirs.push_back(s.Child(n));
  }
  if (options.progress) v.total_ = DecodedBytesOf(item_dirs);
  if (kind == CheckpointKind::kItem) {
    v.VerifyItem(loc, /*expect_pytree=*/true);
  }
  for (const Location& s : steps) {
    Status st = v.VerifyStep(s);
    if (!st.ok()) v.Add({"bad_metadata", "", "", s.Path(), st.ToString()});
  }
  return report;
}

}  // namespace cairn::inspect
