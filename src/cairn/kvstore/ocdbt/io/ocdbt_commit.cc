// OcdbtKvStore commit: durability protocol.
//
// A commit (ApplyBatch, every single-key write, CommitEntries) makes one new
// generation N = G + 1 visible atomically, or nothing:
//
//  1. Take the current manifest (none: a new database with the options'
//     config, random uuid): for the single kind, the one this object last
//     read or wrote for a commit when it has one (step 6 checks that it is
//     still current), else read it. Its config is kept for the whole life
//     of the database.
//  2. Stage: validate keys, sort mutations, keep the last one per key. Values
//     of at most config.max_inline_value_bytes stay inline; larger ones are
//     streamed, in key order, straight from the caller's buffers into new
//     data files `d/<32 random hex>` (data_file_writer.h). A data file that
//     reaches target_data_file_size is committed (made durable) and the next
//     one started. Nothing refers to these files yet. (The batch writer,
//     ocdbt_batch_writer.h, streams values into data files before it calls
//     CommitEntries; on object stores it uploads each full file at once, so
//     such files may be durable long before this commit: still unreferenced
//     until step 6.)
//  3. Copy-on-write update of generation G's B+tree (btree_writer.h): new
//     nodes are appended to the open data file, children before parents.
//  4. Build generation N's manifest (version_writer.h, TensorStore's
//     algorithm): version-tree nodes, if a version block fills up, also go to
//     the data file. commit_time = max(now, previous + 1 ns).
//  5. Commit the last data file (KvWriter::Commit: fdatasync, rename, fsync
//     of the directory). From here every data file the new manifest refers
//     to is durable; a crash leaves only unreferenced files.
//  6. Only then write the manifest, last, conditionally, as TensorStore does
//     without a coordinator: single kind = CompareAndPut of `manifest.ocdbt`
//     expecting exactly the bytes read at step 1 (or its absence), so a
//     reader sees G or N, never a mix, and a writer that committed G + 1
//     meanwhile is detected instead of overwritten; numbered kind =
//     PutIfAbsent of `manifest.%016x` for N.
//  7. On a conflict (another writer, in this process, another process or
//     TensorStore, committed first): re-read the manifest, re-check the
//     write's condition (PutIfAbsent, CompareAndPut; checked against the
//     tree of step 1 too) and redo steps 3-6 on top of it (the values of step 2 stay where they
//     are; the config must not have changed, except that a database that
//     another writer created first with the same config but its own random
//     uuid is adopted). After kMaxCommitAttempts
//     conflicts the commit fails with Unavailable; OK is returned only when
//     the manifest naming N was stored.
//
// Commits of one OcdbtKvStore are serialized by commit_mu_; commits of
// different objects, processes or programs by step 6.
#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "cairn/kvstore/ocdbt/io/version_writer.h"

namespace cairn::ocdbt {
namespace {

uint64_t NowNanos() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

constexpr int kMaxCommitAttempts = 64;

// Sleeps a random time that grows with the number of conflicts so far, so
// writers that keep colliding spread out.
void BackOff(int attempt) {
  thread_local std::minstd_rand rng(std::random_device{}());
  const int cap_us = 100 << std::min(attempt, 7);
  std::this_thread::sleep_for(std::chrono::microseconds(rng() % cap_us));
}

}  // namespace

Status OcdbtKvStore::Put(std::string_view key, ByteView value) {
  std::vector<KvMutationView> m;
  m.push_back({std::string(key), value});
  return ApplyBatchViews(std::move(m));
}

Status OcdbtKvStore::Delete(std::string_view key) {
  std::vector<KvMutationView> m;
  m.push_back({std::string(key), std::nullopt});
  return ApplyBatchViews(std::move(m));
}

Result<bool> OcdbtKvStore::PutIfAbsent(std::string_view key, ByteView value) {
  return CompareAndPut(key, std::nullopt, value);
}

Result<bool> OcdbtKvStore::CompareAndPut(std::string_view key, std::optional<ByteView> expected,
                                         ByteView value) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate(url()));
  auto read = Reader();
  std::string k(key);
  // Checked against the tree each attempt commits on top of (step 7).
  CommitCondition condition =
      [&](const std::optional<BtreeGenerationReference>& root) -> Result<bool> {
    std::optional<LeafValue> current;
    if (root) {
      CAIRN_ASSIGN_OR_RETURN(current,
                             FindKey(*root, k, read, ReadLimits{options_.max_node_read_bytes}));
    }
    if (!current || !expected) return !current && !expected;
    if (current->size() != expected->size()) return false;
    CAIRN_ASSIGN_OR_RETURN(Buffer bytes, ReadValueRange(*current, 0, current->size(), read));
    return bytes.size() == 0 ||
           std::memcmp(bytes.data(), expected->data(), bytes.size()) == 0;
  };
  std::lock_guard<std::mutex> lock(commit_mu_);
  // Early out before any value is staged. A "holds" from the manifest known
  // from the last commit is checked again by the commit's conditional
  // manifest write; a "does not hold" is answered only from a fresh read.
  bool cached = false;
  CAIRN_ASSIGN_OR_RETURN(ReadManifestResult known, ManifestForCommitLocked(&cached));
  CAIRN_ASSIGN_OR_RETURN(auto root, RootOf(known.manifest));
  CAIRN_ASSIGN_OR_RETURN(bool holds, condition(root));
  if (!holds && cached) {
    ForgetLocked();
    CAIRN_ASSIGN_OR_RETURN(known, ManifestForCommitLocked());
    CAIRN_ASSIGN_OR_RETURN(root, RootOf(known.manifest));
    CAIRN_ASSIGN_OR_RETURN(holds, condition(root));
  }
  if (!holds) return false;
  std::vector<KvMutationView> m;
  m.push_back({k, value});
  return CommitLocked(std::move(m), condition);
}

Status OcdbtKvStore::DeletePrefix(std::string_view prefix) {
  std::lock_guard<std::mutex> lock(commit_mu_);
  CAIRN_ASSIGN_OR_RETURN(auto keys, List(prefix));
  std::vector<KvMutationView> m;
  for (auto& k : keys) m.push_back({std::move(k.key), std::nullopt});
  if (m.empty()) return Status::OK();
  return CommitLocked(std::move(m)).status();
}

Status OcdbtKvStore::ApplyBatch(std::vector<KvMutation> mutations) {
  // The views borrow the Buffers of `mutations`, alive until we return.
  std::vector<KvMutationView> views;
  views.reserve(mutations.size());
  for (auto& m : mutations) {
    views.push_back({std::move(m.key), m.value ? std::optional<ByteView>(m.value->view())
                                               : std::nullopt});
  }
  return ApplyBatchViews(std::move(views));
}

Status OcdbtKvStore::ApplyBatchViews(std::vector<KvMutationView> mutations) {
  for (const auto& m : mutations) CAIRN_RETURN_IF_ERROR(ValidateKey(m.key).Annotate(url()));
  // Sort by key; for equal keys the later mutation wins.
  std::stable_sort(mutations.begin(), mutations.end(),
                   [](const KvMutationView& a, const KvMutationView& b) { return a.key < b.key; });
  std::vector<KvMutationView> unique;
  unique.reserve(mutations.size());
  for (auto& m : mutations) {
    if (!unique.empty() && unique.back().key == m.key) {
      unique.back() = std::move(m);
    } else {
      unique.push_back(std::move(m));
    }
  }
  if (unique.empty()) return Status::OK();
  std::lock_guard<std::mutex> lock(commit_mu_);
  return CommitLocked(std::move(unique)).status();
}

Result<OcdbtKvStore::ReadManifestResult> OcdbtKvStore::ManifestForCommitLocked(bool* cached) {
  if (cached != nullptr) *cached = false;
  if (known_) {
    ReadManifestResult r;
    r.manifest = known_->manifest;
    if (known_->bytes) r.bytes = Buffer::CopyOf(*known_->bytes);
    if (cached != nullptr) *cached = true;
    return r;
  }
  CAIRN_ASSIGN_OR_RETURN(ReadManifestResult r, ReadManifestAndBytes());
  RememberLocked(r);
  return r;
}

void OcdbtKvStore::RememberLocked(const ReadManifestResult& r) {
  // Only `manifest.ocdbt` of the single kind is checked by the conditional
  // write against the exact bytes remembered; a store pinned at a generation
  // never commits.
  const ManifestKind kind =
      r.manifest ? r.manifest->config.manifest_kind : options_.config.manifest_kind;
  if (kind != ManifestKind::kSingle || options_.generation || (r.manifest && !r.bytes)) {
    known_.reset();
    return;
  }
  KnownManifest k;
  k.manifest = r.manifest;
  if (r.bytes) k.bytes = std::string(r.bytes->as_string_view());
  known_ = std::move(k);
}

Result<Config> OcdbtKvStore::ConfigForWrites() {
  std::lock_guard<std::mutex> lock(commit_mu_);
  CAIRN_ASSIGN_OR_RETURN(ReadManifestResult r, ManifestForCommitLocked());
  return r.manifest ? r.manifest->config : options_.config;
}

Result<Config> OcdbtKvStore::ConfigForCommit(const std::optional<Manifest>& old) const {
  if (options_.generation) {
    return FailedPreconditionError(url() + ": opened at generation " +
                                   std::to_string(*options_.generation) + " (read-only)");
  }
  Config config = old ? old->config : options_.config;
  if (!old && config.uuid == std::array<uint8_t, 16>{}) {
    std::random_device rd;
    for (auto& b : config.uuid) b = static_cast<uint8_t>(rd());
  }
  return config;
}

Result<bool> OcdbtKvStore::CommitLocked(std::vector<KvMutationView> mutations,
                                        const CommitCondition& condition) {
  // Step 1.
  CAIRN_ASSIGN_OR_RETURN(ReadManifestResult old, ManifestForCommitLocked());
  CAIRN_ASSIGN_OR_RETURN(Config config, ConfigForCommit(old.manifest));
  // Step 2.
  DataFileWriter data(base_.get(), options_.data_prefix, options_.target_data_file_size,
                      options_.value_alignment);
  std::vector<BtreeMutation> staged;
  staged.reserve(mutations.size());
  for (auto& m : mutations) {
    BtreeMutation b{std::move(m.key), std::nullopt};
    if (m.value) {
      LeafValue v;
      if (m.value->size() <= config.max_inline_value_bytes) {
        v.inline_value = std::string(AsStringView(*m.value));
      } else {
        v.is_inline = false;
        CAIRN_ASSIGN_OR_RETURN(v.ref, data.Append(*m.value));
      }
      b.value = std::move(v);
    }
    staged.push_back(std::move(b));
  }
  return CommitStagedLocked(std::move(staged), config, std::move(old), &data, condition);
}

Status OcdbtKvStore::CommitEntries(std::vector<BtreeMutation> entries) {
  for (size_t i = 0; i < entries.size(); ++i) {
    CAIRN_RETURN_IF_ERROR(ValidateKey(entries[i].key).Annotate(url()));
    if (i > 0 && !(entries[i - 1].key < entries[i].key)) {
      return InvalidArgumentError("CommitEntries of " + url() + ": key `" + entries[i].key +
                                  "` out of order or repeated");
    }
  }
  if (entries.empty()) return Status::OK();
  std::lock_guard<std::mutex> lock(commit_mu_);
  CAIRN_ASSIGN_OR_RETURN(ReadManifestResult old, ManifestForCommitLocked());
  CAIRN_ASSIGN_OR_RETURN(Config config, ConfigForCommit(old.manifest));
  DataFileWriter data(base_.get(), options_.data_prefix, options_.target_data_file_size,
                      options_.value_alignment);
  return CommitStagedLocked(std::move(entries), config, std::move(old), &data, nullptr)
      .status();
}

Result<bool> OcdbtKvStore::CommitStagedLocked(std::vector<BtreeMutation> staged,
                                              Config config, ReadManifestResult read_old,
                                              DataFileWriter* data,
                                              const CommitCondition& condition) {
  auto read = Reader();
  const bool numbered = config.manifest_kind == ManifestKind::kNumbered;
  const bool created_here = !read_old.manifest;
  for (int attempt = 0; attempt < kMaxCommitAttempts; ++attempt) {
    if (attempt > 0) {
      // Step 7.
      BackOff(attempt);
      ForgetLocked();
      CAIRN_ASSIGN_OR_RETURN(read_old, ReadManifestAndBytes());
      RememberLocked(read_old);
      if (read_old.manifest && !(read_old.manifest->config == config)) {
        // Another writer created the database first. Its config is as good
        // as ours if only the random uuid differs (the options gave none).
        Config theirs_with_our_uuid = read_old.manifest->config;
        theirs_with_our_uuid.uuid = config.uuid;
        const bool uuid_was_drawn = options_.config.uuid == std::array<uint8_t, 16>{};
        if (!created_here || !uuid_was_drawn || !(theirs_with_our_uuid == config)) {
          return UnavailableError(url() + ": the database was created concurrently with "
                                  "another config; commit abandoned");
        }
        config = read_old.manifest->config;
      }
    }
    if (condition) {
      CAIRN_ASSIGN_OR_RETURN(auto root, RootOf(read_old.manifest));
      CAIRN_ASSIGN_OR_RETURN(bool holds, condition(root));
      if (!holds) return false;
    }
    const std::optional<Manifest>& old = read_old.manifest;
    // Step 3.
    std::optional<BtreeGenerationReference> old_root;
    if (old && !old->versions.empty()) old_root = old->versions.back();
    CAIRN_ASSIGN_OR_RETURN(NewRoot root, UpdateBtree(old_root, staged, config, read, data));
    // Step 4.
    BtreeGenerationReference version;
    version.root = root.root;
    version.root_height = root.height;
    version.generation_number = (old ? old->latest_generation() : 0) + 1;
    uint64_t prev_time = old_root ? old_root->commit_time : 0;
    version.commit_time = std::max(NowNanos(), prev_time + 1);
    CAIRN_ASSIGN_OR_RETURN(Manifest manifest, CreateNewManifest(old, config, version, read, data));
    // Step 5.
    CAIRN_RETURN_IF_ERROR(data->Finish().Annotate("committing " + url()));
    // Step 6.
    if (!numbered) {
      CAIRN_ASSIGN_OR_RETURN(Buffer encoded, EncodeManifest(manifest));
      std::optional<ByteView> expected;
      if (read_old.bytes) expected = read_old.bytes->view();
      auto stored = base_->CompareAndPut(kManifestKey, expected, encoded.view());
      if (!stored.ok()) {
        ForgetLocked();  // whether it was stored is unknown
        return stored.status().Annotate("committing " + url());
      }
      if (*stored) {
        ReadManifestResult now;
        now.manifest = std::move(manifest);
        now.bytes = std::move(encoded);
        RememberLocked(now);
        return true;
      }
      continue;  // another writer committed first
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
    if (stored) return true;
  }
  return UnavailableError(url() + ": " + std::to_string(kMaxCommitAttempts) +
                          " commit attempts lost to concurrent writers; nothing was committed");
}

}  // namespace cairn::ocdbt
