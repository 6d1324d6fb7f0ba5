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
#include <cstring>
#include <chrono>
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

// Value reads of GetMany are blocking I/O: more of them in flight than there
// are cores keeps the device's queue full.
constexpr size_t kReadThreads = 8;

// Over an object store (the base serves many requests at once: its
// io_concurrency), the value reads of GetMany mostly wait on the network:
// up to this many run at once, each one request (the HTTP client bounds what
// is really in flight).
constexpr size_t kRemoteReadThreads = 64;

ThreadPool& ReadPool(const KvStore& base) {
  static ThreadPool* local = new ThreadPool(kReadThreads);
  if (base.io_concurrency() <= kReadThreads) return *local;
  static ThreadPool* remote = new ThreadPool(kRemoteReadThreads);
  return *remote;
}

}  // namespace

OcdbtKvStore::OcdbtKvStore(std::shared_ptr<KvStore> base, OcdbtOptions options)
    : base_(std::move(base)), options_(std::move(options)) {}

std::string OcdbtKvStore::url() const {
  std::string u = base_->url() + "|ocdbt:";
  if (options_.generation) u += "@v" + std::to_string(*options_.generation) + "/";
  return u;
}

ReadObjectFn OcdbtKvStore::Reader() const {
  std::shared_ptr<KvStore> base = base_;
  return [base](const DataFileId& file, uint64_t offset, uint64_t length) -> Result<Buffer> {
    std::string path = file.FullPath();
    if (Status valid = ValidateKey(path); !valid.ok()) {
      return DataLossError("OCDBT data file path `" + path + "` of " + base->url() +
                           " is not a valid key: " + std::string(valid.message()));
    }
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
  CAIRN_ASSIGN_OR_RETURN(ReadManifestResult r, ReadManifestAndBytes());
  return std::move(r.manifest);
}

Result<OcdbtKvStore::ReadManifestResult> OcdbtKvStore::ReadManifestAndBytes() {
  ReadManifestResult out;
  CAIRN_ASSIGN_OR_RETURN(out.bytes, base_->GetAtMost(kManifestKey, options_.max_node_read_bytes));
  if (!out.bytes) return out;
  CAIRN_ASSIGN_OR_RETURN(Manifest m,
                         DecodeManifest(out.bytes->view(), base_->Describe(kManifestKey)));
  if (m.config.manifest_kind == ManifestKind::kSingle) {
    out.manifest = std::move(m);
    return out;
  }
  // Numbered kind: the latest manifest.%016x holds the versions.
  CAIRN_ASSIGN_OR_RETURN(auto keys, base_->List("manifest."));
  uint64_t latest = 0;
  for (const auto& k : keys) latest = std::max(latest, ParseNumberedManifestKey(k.key).value_or(0));
  if (latest == 0) {
    out.manifest = std::move(m);
    return out;
  }
  std::string key = NumberedManifestKey(latest);
  CAIRN_ASSIGN_OR_RETURN(auto numbered, base_->GetAtMost(key, options_.max_node_read_bytes));
  if (!numbered) return UnavailableError(base_->Describe(key) + " vanished while reading");
  CAIRN_ASSIGN_OR_RETURN(Manifest full, DecodeManifest(numbered->view(), base_->Describe(key)));
  Config expected = m.config;
  expected.manifest_kind = ManifestKind::kSingle;
  if (!(full.config == expected) || full.latest_generation() != latest) {
    return DataLossError(base_->Describe(key) + ": config or generation does not match " +
                         std::string(kManifestKey));
  }
  full.config.manifest_kind = ManifestKind::kNumbered;
  out.manifest = std::move(full);
  return out;
}

Result<std::optional<BtreeGenerationReference>> OcdbtKvStore::RootOf(
    const std::optional<Manifest>& manifest) {
  std::optional<BtreeGenerationReference> root;
  if (manifest) {
    CAIRN_ASSIGN_OR_RETURN(root, FindGeneration(*manifest, options_.generation.value_or(0),
                                                Reader(), LimitsFor(manifest)));
  }
  if (!root && options_.generation) {
    // As TensorStore: a fixed version that does not exist is an error.
    return NotFoundError("generation " + std::to_string(*options_.generation) +
                         " is not present in " + url());
  }
  return root;
}

ReadLimits OcdbtKvStore::LimitsFor(const std::optional<Manifest>& m) const {
  ReadLimits limits = NodeReadLimits(m ? m->config : options_.config, options_.max_node_read_bytes);
  limits.node_cache = node_cache_.get();
  return limits;
}

// The latest generation's view, read after this call began. Concurrent
// callers share manifest reads, as TensorStore's reads do: call t waits for
// a read that started after t arrived (the one in progress when t arrives
// started before it, so t waits for it to end and then for the next one, or
// starts that next one itself). Each answer is thus as fresh as a read of
// its own, and N concurrent reads cost about two manifest requests, not N.
Result<OcdbtKvStore::ReadView> OcdbtKvStore::ReadViewNow() {
  if (options_.generation) return FetchView();
  std::unique_lock<std::mutex> lock(view_mu_);
  const uint64_t ticket = ++view_tickets_;
  for (;;) {
    if (view_served_ >= ticket) return *view_last_;
    if (!view_reading_) break;
    ++view_waiting_;
    view_read_done_.wait(lock);
    --view_waiting_;
  }
  view_reading_ = true;
  const uint64_t covers = view_tickets_;  // every call that arrived so far
  lock.unlock();
  auto result = std::make_shared<const Result<ReadView>>(FetchView());
  lock.lock();
  view_reading_ = false;
  view_served_ = covers;
  view_last_ = result;
  view_read_done_.notify_all();
  return *result;
}

uint64_t OcdbtKvStore::reads_waiting_for_manifest() const {
  std::lock_guard<std::mutex> lock(view_mu_);
  return view_waiting_;
}

Result<OcdbtKvStore::ReadView> OcdbtKvStore::FetchView() {
  if (options_.generation) {
    std::lock_guard<std::mutex> lock(pinned_mu_);
    if (pinned_) return *pinned_;
  }
  CAIRN_ASSIGN_OR_RETURN(auto manifest, ReadManifest());
  ReadView view;
  CAIRN_ASSIGN_OR_RETURN(view.root, RootOf(manifest));
  view.limits = LimitsFor(manifest);
  if (options_.generation) {
    std::lock_guard<std::mutex> lock(pinned_mu_);
    pinned_ = view;
  }
  return view;
}

Result<std::shared_ptr<OcdbtKvStore>> OcdbtKvStore::PinLatest() {
  CAIRN_ASSIGN_OR_RETURN(auto manifest, ReadManifest());
  OcdbtOptions options = options_;
  ReadView view;
  view.limits = LimitsFor(manifest);
  if (manifest && !manifest->versions.empty()) {
    CAIRN_ASSIGN_OR_RETURN(view.root, FindGeneration(*manifest, options_.generation.value_or(0),
                                                     Reader(), view.limits));
    if (view.root) options.generation = view.root->generation_number;
  }
  auto pinned = std::make_shared<OcdbtKvStore>(base_, std::move(options));
  pinned->node_cache_ = node_cache_;
  if (pinned->options_.generation) pinned->pinned_ = std::move(view);
  return pinned;
}

Result<std::optional<Buffer>> OcdbtKvStore::Get(std::string_view key, const ByteRange& range) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate(url()));
  auto read = Reader();
  CAIRN_ASSIGN_OR_RETURN(ReadView view, ReadViewNow());
  const auto& root = view.root;
  if (!root) return std::optional<Buffer>();
  CAIRN_ASSIGN_OR_RETURN(auto value, FindKey(*root, key, read, view.limits));
  if (!value) return std::optional<Buffer>();
  auto span = ResolveByteRange(range, value->size());
  if (!span.ok()) return span.status().Annotate("reading " + Describe(key));
  CAIRN_ASSIGN_OR_RETURN(Buffer bytes, ReadValueRange(*value, span->first, span->second, read));
  return std::optional(std::move(bytes));
}

Status OcdbtKvStore::GetMany(const std::vector<KeyRead>& reads, const KeyReadFn& fn) {
  for (const KeyRead& r : reads) CAIRN_RETURN_IF_ERROR(ValidateKey(r.key).Annotate(url()));
  if (reads.empty()) return Status::OK();
  CAIRN_ASSIGN_OR_RETURN(ReadView view, ReadViewNow());
  if (!view.root) {
    for (size_t i = 0; i < reads.size(); ++i) CAIRN_RETURN_IF_ERROR(fn(i, std::nullopt));
    return Status::OK();
  }
  std::vector<size_t> order(reads.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return reads[a].key < reads[b].key; });
  std::vector<std::string> sorted;
  sorted.reserve(reads.size());
  for (size_t i : order) sorted.push_back(reads[i].key);
  // The leaves stay alive in `found` while the parts point at them.
  std::vector<LeafValue> found;
  found.reserve(reads.size());
  std::vector<size_t> found_read;  // found[j] answers reads[found_read[j]]
  std::vector<size_t> missing;
  auto read = Reader();
  CAIRN_RETURN_IF_ERROR(FindKeys(
      *view.root, sorted, read,
      [&](size_t i, const LeafValue* value) -> Status {
        if (value == nullptr) {
          missing.push_back(order[i]);
        } else {
          found.push_back(*value);
          found_read.push_back(order[i]);
        }
        return Status::OK();
      },
      view.limits));
  std::vector<ValuePart> parts(found.size());
  for (size_t j = 0; j < found.size(); ++j) {
    const KeyRead& r = reads[found_read[j]];
    if (r.max_bytes != 0 && r.range.IsAll() && found[j].size() > r.max_bytes) {
      return ResourceExhaustedError("reading " + Describe(r.key) + ": the value has " +
                                    std::to_string(found[j].size()) + " bytes, over the limit of " +
                                    std::to_string(r.max_bytes));
    }
    auto span = ResolveByteRange(r.range, found[j].size());
    if (!span.ok()) return span.status().Annotate("reading " + Describe(r.key));
    parts[j] = {&found[j], span->first, span->second};
  }
  for (size_t i : missing) CAIRN_RETURN_IF_ERROR(fn(i, std::nullopt));
  return StreamValues(parts, read, ReadPool(*base_), [&](size_t j, SharedBytes bytes) {
    return fn(found_read[j], bytes.view());
  });
}

Result<std::vector<std::optional<SharedBytes>>> OcdbtKvStore::GetMany(
    const std::vector<std::string>& keys) {
  for (const auto& k : keys) CAIRN_RETURN_IF_ERROR(ValidateKey(k).Annotate(url()));
  std::vector<std::optional<SharedBytes>> out(keys.size());
  CAIRN_ASSIGN_OR_RETURN(ReadView view, ReadViewNow());
  const auto& root = view.root;
  if (!root) return out;
  // Sorted order for the descent; then the values, coalesced (batch_read.h).
  std::vector<size_t> order(keys.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return keys[a] < keys[b]; });
  std::vector<std::string> sorted;
  sorted.reserve(keys.size());
  for (size_t i : order) sorted.push_back(keys[i]);
  auto read = Reader();
  std::vector<LeafValue> found;
  std::vector<size_t> slots;
  CAIRN_RETURN_IF_ERROR(
      FindKeys(*root, sorted, read, [&](size_t i, const LeafValue* value) -> Status {
        if (value != nullptr) {
          found.push_back(*value);
          slots.push_back(order[i]);
        }
        return Status::OK();
      },
      view.limits));
  CAIRN_ASSIGN_OR_RETURN(std::vector<SharedBytes> bytes, ReadValues(found, read, ReadPool(*base_)));
  for (size_t j = 0; j < slots.size(); ++j) out[slots[j]] = std::move(bytes[j]);
  return out;
}

Result<std::vector<KeyInfo>> OcdbtKvStore::List(std::string_view prefix) {
  std::vector<KeyInfo> out;
  CAIRN_ASSIGN_OR_RETURN(ReadView view, ReadViewNow());
  if (!view.root) return out;
  CAIRN_RETURN_IF_ERROR(ListEntries(
      *view.root, prefix, Reader(),
      [&](std::string_view key, const LeafValue& v) {
        out.push_back({std::string(key), v.size()});
        return Status::OK();
      },
      view.limits));
  return out;
}

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

Result<std::shared_ptr<KvStore>> OpenOcdbtKvStore(std::shared_ptr<KvStore> base,
                                                  const OcdbtOptions& options) {
  if (!base) return InvalidArgumentError("OCDBT needs a base kvstore");
  return std::shared_ptr<KvStore>(std::make_shared<OcdbtKvStore>(std::move(base), options));
}

}  // namespace cairn::ocdbt
