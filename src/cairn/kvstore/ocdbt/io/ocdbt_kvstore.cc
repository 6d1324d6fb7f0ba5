// OcdbtKvStore commit: durability protocol.
//
// A commit (ApplyBatch, and every single-key write) makes one new generation
// N = G + 1 visible atomically, or nothing:
//
//  1. Stage: validate keys, sort mutations, keep the last one per key. Values
//     larger than config.max_inline_value_bytes are appended to a new
//     in-memory data file `d/<32 random hex>`; smaller ones stay inline.
//  2. Read the current manifest (none: a new database with the options'
//     config). Its config is kept for the whole life of the database.
//  3. Copy-on-write update of generation G's B+tree (btree_writer.h): new
//     nodes are appended to the same data file, children before parents.
//  4. Build generation N's manifest (version_writer.h, TensorStore's
//     algorithm): version-tree nodes, if a version block fills up, also go to
//     the data file. commit_time = max(now, previous + 1 ns).
//  5. Write the data file with the base store's Put, which is durable when it
//     returns (file driver: write, fsync, rename, fsync the directory).
//     Nothing refers to it yet: a crash here leaves an unreferenced file.
//  6. Only then write the manifest, last: single kind = Put of
//     `manifest.ocdbt` (atomic replace, so a reader sees G or N, never a mix);
//     numbered kind = PutIfAbsent of `manifest.%016x` for N, retried from
//     step 2 when another writer took N.
//
// Commits of one OcdbtKvStore are serialized by commit_mu_.
#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "cairn/kvstore/ocdbt/io/btree_writer.h"
#include "cairn/kvstore/ocdbt/io/data_file_writer.h"
#include "cairn/kvstore/ocdbt/io/version_writer.h"

namespace cairn::ocdbt {
namespace {

uint64_t NowNanos() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

constexpr int kMaxCommitAttempts = 16;

}  // namespace

OcdbtKvStore::OcdbtKvStore(std::shared_ptr<KvStore> base, OcdbtOptions options)
    : base_(std::move(base)), options_(std::move(options)) {}

ReadObjectFn OcdbtKvStore::Reader() const {
  std::shared_ptr<KvStore> base = base_;
  return [base](const DataFileId& file, uint64_t offset, uint64_t length) -> Result<Buffer> {
    std::string path = file.FullPath();
    auto got = base->Get(path, ByteRange::Range(offset, length));
    if (!got.ok()) {
      if (got.status().code() == StatusCode::kInvalidArgument) {
        return DataLossError(base->Describe(path) + ": reference to bytes [" +
                             std::to_string(offset) + ", +" + std::to_string(length) +
                             ") outside the data file");
      }
      return got.status().Annotate("reading OCDBT data file " + base->Describe(path));
    }
    if (!got->has_value()) {
      return DataLossError("missing OCDBT data file " + base->Describe(path));
    }
    if ((*got)->size() != length) {
      return DataLossError("short read of OCDBT data file " + base->Describe(path));
    }
    return std::move(**got);
  };
}

Result<std::optional<Manifest>> OcdbtKvStore::ReadManifest() {
  CAIRN_ASSIGN_OR_RETURN(auto bytes, base_->Get(kManifestKey));
  if (!bytes) return std::optional<Manifest>();
  CAIRN_ASSIGN_OR_RETURN(Manifest m,
                         DecodeManifest(bytes->view(), base_->Describe(kManifestKey)));
  if (m.config.manifest_kind == ManifestKind::kSingle) return std::optional(std::move(m));
  // Numbered kind: the latest manifest.%016x holds the versions.
  CAIRN_ASSIGN_OR_RETURN(auto keys, base_->List("manifest."));
  uint64_t latest = 0;
  for (const auto& k : keys) latest = std::max(latest, ParseNumberedManifestKey(k.key).value_or(0));
  if (latest == 0) return std::optional(std::move(m));
  std::string key = NumberedManifestKey(latest);
  CAIRN_ASSIGN_OR_RETURN(auto numbered, base_->Get(key));
  if (!numbered) return UnavailableError(base_->Describe(key) + " vanished while reading");
  CAIRN_ASSIGN_OR_RETURN(Manifest full, DecodeManifest(numbered->view(), base_->Describe(key)));
  Config expected = m.config;
  expected.manifest_kind = ManifestKind::kSingle;
  if (!(full.config == expected) || full.latest_generation() != latest) {
    return DataLossError(base_->Describe(key) + ": config or generation does not match " +
                         std::string(kManifestKey));
  }
  full.config.manifest_kind = ManifestKind::kNumbered;
  return std::optional(std::move(full));
}

Result<std::optional<BtreeGenerationReference>> OcdbtKvStore::ReadRoot() {
  CAIRN_ASSIGN_OR_RETURN(auto manifest, ReadManifest());
  if (!manifest) return std::optional<BtreeGenerationReference>();
  return FindGeneration(*manifest, options_.generation.value_or(0), Reader());
}

Result<std::optional<Buffer>> OcdbtKvStore::Get(std::string_view key, const ByteRange& range) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key));
  auto read = Reader();
  CAIRN_ASSIGN_OR_RETURN(auto root, ReadRoot());
  if (!root) return std::optional<Buffer>();
  CAIRN_ASSIGN_OR_RETURN(auto value, FindKey(*root, key, read));
  if (!value) return std::optional<Buffer>();
  CAIRN_ASSIGN_OR_RETURN(auto span, ResolveByteRange(range, value->size()));
  CAIRN_ASSIGN_OR_RETURN(Buffer bytes, ReadValueRange(*value, span.first, span.second, read));
  return std::optional(std::move(bytes));
}

Result<std::vector<KeyInfo>> OcdbtKvStore::List(std::string_view prefix) {
  std::vector<KeyInfo> out;
  CAIRN_ASSIGN_OR_RETURN(auto root, ReadRoot());
  if (!root) return out;
  CAIRN_RETURN_IF_ERROR(
      ListEntries(*root, prefix, Reader(), [&](std::string_view key, const LeafValue& v) {
        out.push_back({std::string(key), v.size()});
        return Status::OK();
      }));
  return out;
}

Status OcdbtKvStore::Put(std::string_view key, ByteView value) {
  std::vector<KvMutation> m;
  m.push_back({std::string(key), Buffer::CopyOf(value)});
  return ApplyBatch(std::move(m));
}

Status OcdbtKvStore::Delete(std::string_view key) {
  std::vector<KvMutation> m;
  m.push_back({std::string(key), std::nullopt});
  return ApplyBatch(std::move(m));
}

Result<bool> OcdbtKvStore::PutIfAbsent(std::string_view key, ByteView value) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key));
  std::lock_guard<std::mutex> lock(commit_mu_);
  CAIRN_ASSIGN_OR_RETURN(auto root, ReadRoot());
  if (root) {
    CAIRN_ASSIGN_OR_RETURN(auto existing, FindKey(*root, key, Reader()));
    if (existing) return false;
  }
  std::vector<KvMutation> m;
  m.push_back({std::string(key), Buffer::CopyOf(value)});
  CAIRN_RETURN_IF_ERROR(CommitLocked(std::move(m)));
  return true;
}

Status OcdbtKvStore::DeletePrefix(std::string_view prefix) {
  std::lock_guard<std::mutex> lock(commit_mu_);
  CAIRN_ASSIGN_OR_RETURN(auto keys, List(prefix));
  std::vector<KvMutation> m;
  for (auto& k : keys) m.push_back({std::move(k.key), std::nullopt});
  if (m.empty()) return Status::OK();
  return CommitLocked(std::move(m));
}

Status OcdbtKvStore::ApplyBatch(std::vector<KvMutation> mutations) {
  for (const auto& m : mutations) CAIRN_RETURN_IF_ERROR(ValidateKey(m.key));
  // Sort by key; for equal keys the later mutation wins.
  std::stable_sort(mutations.begin(), mutations.end(),
                   [](const KvMutation& a, const KvMutation& b) { return a.key < b.key; });
  std::vector<KvMutation> unique;
  for (auto& m : mutations) {
    if (!unique.empty() && unique.back().key == m.key) {
      unique.back() = std::move(m);
    } else {
      unique.push_back(std::move(m));
    }
  }
  if (unique.empty()) return Status::OK();
  std::lock_guard<std::mutex> lock(commit_mu_);
  return CommitLocked(std::move(unique));
}

Status OcdbtKvStore::CommitLocked(std::vector<KvMutation> mutations) {
  if (options_.generation) {
    return FailedPreconditionError(url() + ": opened at generation " +
                                   std::to_string(*options_.generation) + " (read-only)");
  }
  auto read = Reader();
  for (int attempt = 0; attempt < kMaxCommitAttempts; ++attempt) {
    // Steps 1-2.
    CAIRN_ASSIGN_OR_RETURN(auto old, ReadManifest());
    Config config = old ? old->config : options_.config;
    if (!old && config.uuid == std::array<uint8_t, 16>{}) {
      std::random_device rd;
      for (auto& b : config.uuid) b = static_cast<uint8_t>(rd());
    }
    const bool numbered = config.manifest_kind == ManifestKind::kNumbered;
    DataFileWriter data(options_.data_prefix);
    std::vector<BtreeMutation> staged;
    staged.reserve(mutations.size());
    for (const auto& m : mutations) {
      BtreeMutation b{m.key, std::nullopt};
      if (m.value) {
        LeafValue v;
        if (m.value->size() <= config.max_inline_value_bytes) {
          v.inline_value = m.value->ToString();
        } else {
          v.is_inline = false;
          v.ref = data.Append(m.value->view());
        }
        b.value = std::move(v);
      }
      staged.push_back(std::move(b));
    }
    // Step 3.
    std::optional<BtreeGenerationReference> old_root;
    if (old && !old->versions.empty()) old_root = old->versions.back();
    CAIRN_ASSIGN_OR_RETURN(NewRoot root, UpdateBtree(old_root, staged, config, read, &data));
    // Step 4.
    BtreeGenerationReference version;
    version.root = root.root;
    version.root_height = root.height;
    version.generation_number = (old ? old->latest_generation() : 0) + 1;
    uint64_t prev_time = old_root ? old_root->commit_time : 0;
    version.commit_time = std::max(NowNanos(), prev_time + 1);
    CAIRN_ASSIGN_OR_RETURN(Manifest manifest,
                           CreateNewManifest(old, config, version, read, &data));
    // Step 5.
    if (!data.empty()) {
      CAIRN_RETURN_IF_ERROR(base_->Put(data.id().FullPath(), data.contents().view())
                                .Annotate("writing OCDBT data file of " + url()));
    }
    // Step 6.
    if (!numbered) {
      CAIRN_ASSIGN_OR_RETURN(Buffer encoded, EncodeManifest(manifest));
      return base_->Put(kManifestKey, encoded.view()).Annotate("committing " + url());
    }
    if (!old) {
      Manifest config_only;
      config_only.config = config;
      CAIRN_ASSIGN_OR_RETURN(Buffer encoded, EncodeManifest(config_only));
      CAIRN_ASSIGN_OR_RETURN(bool created, base_->PutIfAbsent(kManifestKey, encoded.view()));
      if (!created) continue;  // another writer created the database first
    }
    manifest.config.manifest_kind = ManifestKind::kSingle;
    CAIRN_ASSIGN_OR_RETURN(Buffer encoded, EncodeManifest(manifest));
    CAIRN_ASSIGN_OR_RETURN(
        bool stored,
        base_->PutIfAbsent(NumberedManifestKey(version.generation_number), encoded.view()));
    if (stored) return Status::OK();
  }
  return UnavailableError(url() + ": too many concurrent commits, giving up");
}

Result<std::shared_ptr<KvStore>> OpenOcdbtKvStore(std::shared_ptr<KvStore> base,
                                                  const OcdbtOptions& options) {
  if (!base) return InvalidArgumentError("OCDBT needs a base kvstore");
  return std::shared_ptr<KvStore>(std::make_shared<OcdbtKvStore>(std::move(base), options));
}

}  // namespace cairn::ocdbt
