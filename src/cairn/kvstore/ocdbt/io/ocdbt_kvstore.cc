// OcdbtKvStore reads: the manifest (shared among concurrent reads), Get,
// GetMany, List, pinned generations. The writes and their durability
// protocol are in ocdbt_commit.cc.
#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"

#include <algorithm>

namespace cairn::ocdbt {
namespace {

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

Result<std::shared_ptr<KvStore>> OpenOcdbtKvStore(std::shared_ptr<KvStore> base,
                                                  const OcdbtOptions& options) {
  if (!base) return InvalidArgumentError("OCDBT needs a base kvstore");
  return std::shared_ptr<KvStore>(std::make_shared<OcdbtKvStore>(std::move(base), options));
}

}  // namespace cairn::ocdbt
