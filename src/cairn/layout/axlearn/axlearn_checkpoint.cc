#include "cairn/layout/axlearn/axlearn_checkpoint.h"

#include <algorithm>
#include <map>

#include "cairn/layout/counting_kvstore.h"
#include "cairn/zarr/array.h"
#include "cairn/zarr/chunk_check.h"
#include "cairn/zarr/chunk_encoder.h"
#include "cairn/zarr/stored_chunk.h"
#include "cairn/zarr/stored_chunks.h"

namespace cairn::axlearn {
namespace {

std::string WithSlash(std::string prefix) {
  if (!prefix.empty() && prefix.back() != '/') prefix += '/';
  return prefix;
}

std::string ArrayPrefix(const std::string& step_prefix, const std::string& path) {
  return step_prefix + "gda/" + path + "/";
}

// Sets each array's stored_bytes: the sizes of the keys under its
// directory (metadata and chunks), from one listing of the step's gda/.
Status CountStoredBytes(KvStore& store, const std::string& step_prefix,
                        std::vector<layout::ArrayInfo>& arrays) {
  std::map<std::string, layout::ArrayInfo*, std::less<>> by_dir;
  for (layout::ArrayInfo& a : arrays) by_dir[ArrayPrefix(step_prefix, a.path)] = &a;
  const std::string gda = step_prefix + "gda/";
  auto keys = store.List(gda);
  if (!keys.ok()) return keys.status().Annotate("listing " + store.Describe(gda));
  for (const KeyInfo& k : *keys) {
    // The nearest enclosing array directory (chunk keys may nest: "0/0").
    std::string_view dir = k.key;
    while (true) {
      const size_t slash = dir.substr(0, dir.size() - (dir.ends_with('/') ? 1 : 0)).rfind('/');
      if (slash == std::string_view::npos || slash < gda.size()) break;
      dir = dir.substr(0, slash + 1);
      if (auto it = by_dir.find(dir); it != by_dir.end()) {
        it->second->stored_bytes += k.size;
        break;
      }
    }
  }
  return Status();
}

// Index paths become key prefixes: refuse ones that would leave gda/.
Status CheckTensorPath(const std::string& path, std::string_view what) {
  bool bad = path.empty() || path.front() == '/' || path.back() == '/';
  size_t start = 0;
  while (!bad && start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string_view part(path.data() + start, end - start);
    bad = part.empty() || part == "." || part == "..";
    start = end + 1;
  }
  if (!bad) return Status::OK();
  return Status(StatusCode::kDataLoss,
                std::string(what) + ": tensor path `" + path + "` is not a relative path");
}

class AxlearnReader final : public layout::CheckpointReader {
 public:
  std::string_view format() const override { return "axlearn"; }
  const std::vector<layout::ArrayInfo>& arrays() const override { return arrays_; }

  Status ReadBox(std::string_view path, const Box& box, void* dest) override {
    auto it = zarr_.find(std::string(path));
    if (it == zarr_.end()) {
      return Status(StatusCode::kNotFound, "no tensor `" + std::string(path) + "` in " + url_);
    }
    return it->second->Read(box, dest).Annotate("tensor `" + std::string(path) + "`");
  }

  std::shared_ptr<ZarrArray> ZarrArrayOf(std::string_view path) const override {
    auto it = zarr_.find(std::string(path));
    return it == zarr_.end() ? nullptr : it->second;
  }

  std::optional<uint64_t> StoredBytesRead() const override { return counted_->bytes_read(); }

  std::string StoredChunkForm(std::string_view path) const override {
    auto it = zarr_.find(std::string(path));
    return it == zarr_.end() ? "" : cairn::StoredChunkForm(it->second->metadata());
  }

  Result<std::optional<StoredChunk>> ReadStoredChunk(std::string_view path, const Box& box) override {
    auto it = zarr_.find(std::string(path));
    if (it == zarr_.end()) {
      return Status(StatusCode::kNotFound, "no tensor `" + std::string(path) + "` in " + url_);
    }
    auto got = cairn::ReadStoredChunk(*it->second, box);
    if (!got.ok()) return got.status().Annotate("tensor `" + std::string(path) + "`");
    return got;
  }

  Result<std::optional<Buffer>> ReadWholeChunk(std::string_view path, const Box& box) override {
    auto it = zarr_.find(std::string(path));
    if (it == zarr_.end()) {
      return Status(StatusCode::kNotFound, "no tensor `" + std::string(path) + "` in " + url_);
    }
    auto got = it->second->ReadWholeChunk(box);
    if (!got.ok()) return got.status().Annotate("tensor `" + std::string(path) + "`");
    return got;
  }

  // Every stored chunk of every tensor through the zarr layer's check; JAX
  // stores every chunk, so a missing one is damage. The chunks are listed
  // (zarr/stored_chunks.h): the work is bounded by what is stored, and
  // beyond the first kMaxListedMissing missing chunks of a tensor the rest
  // are counted in one problem, as ranges.
  Result<layout::VerifyStoredStats> VerifyStored(
      const std::function<void(layout::StoredProblem)>& problem,
      const std::function<void(uint64_t, uint64_t)>& progress) override {
    constexpr size_t kMaxListedMissing = 20;
    layout::VerifyStoredStats stats;
    uint64_t total = 0;
    for (const layout::ArrayInfo& a : arrays_) total += NumElements(a.shape) * DTypeSize(a.dtype);
    for (const layout::ArrayInfo& a : arrays_) {
      ++stats.arrays;
      const ZarrArray& array = *zarr_.at(a.path);
      const ArrayMetadata& md = array.metadata();
      const std::string prefix = ArrayPrefix(step_prefix_, a.path);
      auto chunks = ListStoredChunks(*store_, prefix, md);
      if (!chunks.ok()) {
        problem({"unreadable", a.path, prefix, store_->url() + prefix, chunks.status().ToString()});
        continue;
      }
      for (const GridCell& cell : chunks->stored) {
        const std::string key = prefix + array.ChunkKey(cell);
        auto stored = store_->Get(key);
        ++stats.pieces;
        stats.bytes += md.chunk_spec().num_bytes();
        if (!stored.ok()) {
          problem({"unreadable", a.path, key, store_->url() + key, stored.status().ToString()});
        } else {
          const ChunkCheck check = CheckStoredChunk(md, *stored, /*require_all=*/true);
          if (!check.ok()) {
            problem({ChunkCheckKindName(check.kind), a.path, key, store_->url() + key,
                     check.message});
          }
        }
        if (progress) progress(std::min(stats.bytes, total), total);
      }
      if (chunks->missing() == 0) continue;
      const ChunkCheck absent = CheckStoredChunk(md, std::nullopt, /*require_all=*/true);
      for (const GridCell& cell : FirstMissingCells(*chunks, kMaxListedMissing)) {
        const std::string key = prefix + array.ChunkKey(cell);
        problem({ChunkCheckKindName(absent.kind), a.path, key, store_->url() + key, absent.message});
      }
      if (chunks->missing() > kMaxListedMissing) {
        problem({"more", a.path, "", store_->url() + prefix, DescribeMissing(*chunks, md)});
      }
    }
    return stats;
  }

  std::shared_ptr<KvStore> store_;  // counted_
  std::shared_ptr<layout::CountingKvStore> counted_;
  std::string step_prefix_;
  std::string url_;
  std::vector<layout::ArrayInfo> arrays_;
  std::map<std::string, std::shared_ptr<ZarrArray>> zarr_;
};

// True when `box` is exactly the in-bounds part of one chunk of `md`'s grid
// (its cell in `cell`).
bool OneChunk(const ArrayMetadata& md, const Box& box, std::vector<Index>& cell) {
  if (box.rank() != md.shape.size()) return false;
  cell.assign(box.rank(), 0);
  for (size_t d = 0; d < box.rank(); ++d) {
    const Index c = md.chunk_shape[d];
    if (c <= 0 || box.origin[d] < 0 || box.origin[d] % c != 0) return false;
    cell[d] = box.origin[d] / c;
  }
  return ChunkValidBox(md, cell) == box;
}

class AxlearnWriter final : public layout::CheckpointWriter {
 public:
  std::string_view format() const override { return "axlearn"; }

  Status WriteBox(std::string_view path, const Box& box, const void* src) override {
    auto it = zarr_.find(std::string(path));
    if (it == zarr_.end()) {
      return Status(StatusCode::kNotFound,
                    "no tensor `" + std::string(path) + "` declared for " + store_->url());
    }
    const ZarrArray& z = *it->second;
    std::vector<Index> cell;
    if (!box.empty() && OneChunk(z.metadata(), box, cell)) {
      // One chunk: encoded straight from the caller's bytes (no staging
      // copy, as ZarrArray::Write makes), and stored like it.
      const ByteView data(static_cast<const uint8_t*>(src),
                          static_cast<size_t>(box.num_elements()) * DTypeSize(z.dtype()));
      auto encoded = EncodeChunk(z.metadata(), cell, data, /*store_fill=*/true);
      if (!encoded.ok()) return encoded.status().Annotate("tensor `" + std::string(path) + "`");
      const std::string key = z.prefix() + encoded->key;
      return store_->Put(key, encoded->as_is ? data : encoded->bytes.view())
          .Annotate("writing " + store_->Describe(key))
          .Annotate("tensor `" + std::string(path) + "`");
    }
    return z.Write(box, src).Annotate("tensor `" + std::string(path) + "`");
  }

  std::string StoredChunkForm(std::string_view path) const override {
    auto it = zarr_.find(std::string(path));
    return it == zarr_.end() ? "" : cairn::StoredChunkForm(it->second->metadata());
  }

  // A chunk another array stored in the same form: stored as it is.
  Status WriteStoredChunk(std::string_view path, const Box& box, ByteView stored) override {
    auto it = zarr_.find(std::string(path));
    if (it == zarr_.end()) {
      return Status(StatusCode::kNotFound,
                    "no tensor `" + std::string(path) + "` declared for " + store_->url());
    }
    return cairn::WriteStoredChunk(*it->second, box, stored).Annotate("tensor `" + std::string(path) + "`");
  }

  Result<bool> ArrayComplete(std::string_view path) override {
    auto it = complete_.find(std::string(path));
    return it != complete_.end() && it->second;
  }

  Status Commit() override {
    const std::string key = step_prefix_ + std::string(kIndexFile);
    CAIRN_RETURN_IF_ERROR(
        store_->Put(key, AsBytes(FormatIndex(index_))).Annotate("writing " + store_->Describe(key)));
    // The token only matters while the step is uncommitted.
    if (has_token_) store_->Delete(step_prefix_ + std::string(kResumeTokenFile)).IgnoreError();
    return Status::OK();
  }

  std::shared_ptr<KvStore> store_;
  bool has_token_ = false;
  std::map<std::string, bool> complete_;  // arrays an interrupted run completed
  std::string step_prefix_;
  StepIndex index_;
  std::map<std::string, std::shared_ptr<ZarrArray>> zarr_;
};

// True when the step holds `token` (an interrupted run of the same
// conversion); then (re)writes it.
Result<bool> TakeResumeToken(KvStore& store, const std::string& step_prefix, const std::string& token) {
  const std::string key = step_prefix + std::string(kResumeTokenFile);
  auto got = store.Get(key);
  if (!got.ok()) return got.status().Annotate("reading " + store.Describe(key));
  const bool same = *got && std::string_view(reinterpret_cast<const char*>((*got)->data()),
                                             (*got)->size()) == token;
  if (!same) CAIRN_RETURN_IF_ERROR(store.Put(key, AsBytes(token)).Annotate("writing " + store.Describe(key)));
  return same;
}

// True when every chunk of the zarr v2 array at `prefix` with metadata
// `md` (whose document is `text`) is stored, under that very metadata, and
// intact (the zarr layer's chunk check: it decodes to a whole chunk).
Result<bool> StoredWhole(KvStore& store, const std::string& prefix, const ArrayMetadata& md_parsed,
                         const std::string& text, const Shape& shape, const Json& chunks) {
  auto md = store.Get(prefix + ".zarray");
  if (!md.ok()) return md.status();
  if (!*md || std::string_view(reinterpret_cast<const char*>((*md)->data()), (*md)->size()) != text) {
    return false;
  }
  uint64_t want = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    const Index c = std::max<Index>(1, chunks[d].get<Index>());
    want *= static_cast<uint64_t>((shape[d] + c - 1) / c);
  }
  auto keys = store.List(prefix);
  if (!keys.ok()) return keys.status();
  std::vector<std::string> chunk_keys;
  for (const KeyInfo& k : *keys) {
    if (k.key.find('/', prefix.size()) == std::string::npos && k.key != prefix + ".zarray") {
      chunk_keys.push_back(k.key);
    }
  }
  if (chunk_keys.size() != want) return false;
  for (const std::string& key : chunk_keys) {
    auto value = store.Get(key);  // unreadable is damaged too: written again
    if (!value.ok() || !CheckStoredChunk(md_parsed, *value, /*require_all=*/true).ok()) return false;
  }
  return true;
}

}  // namespace

Result<StepIndex> ReadIndex(KvStore& store, const std::string& step_prefix) {
  const std::string key = WithSlash(step_prefix) + std::string(kIndexFile);
  // The size first, so that an index of any size is never read whole.
  auto listed = store.List(key);
  if (!listed.ok()) return listed.status().Annotate("listing " + store.Describe(key));
  auto found = std::find_if(listed->begin(), listed->end(),
                            [&](const KeyInfo& k) { return k.key == key; });
  if (found == listed->end()) {
    return Status(StatusCode::kNotFound, store.Describe(key) +
                                             " is missing: the step is not a committed AXLearn "
                                             "checkpoint");
  }
  if (found->size > kMaxIndexBytes) {
    return Status(StatusCode::kDataLoss, store.Describe(key) + " is over the 64 MiB limit");
  }
  auto got = store.Get(key);
  if (!got.ok()) return got.status().Annotate("reading " + store.Describe(key));
  if (!*got) return Status(StatusCode::kNotFound, store.Describe(key) + " vanished while reading");
  if ((*got)->size() > kMaxIndexBytes) {
    return Status(StatusCode::kDataLoss, store.Describe(key) + " is over the 64 MiB limit");
  }
  return ParseIndex(std::string_view(reinterpret_cast<const char*>((*got)->data()), (*got)->size()),
                    store.Describe(key));
}

Result<std::unique_ptr<layout::CheckpointReader>> OpenReader(std::shared_ptr<KvStore> store,
                                                             std::string step_prefix) {
  step_prefix = WithSlash(std::move(step_prefix));
  CAIRN_ASSIGN_OR_RETURN(StepIndex index, ReadIndex(*store, step_prefix));
  auto reader = std::make_unique<AxlearnReader>();
  reader->url_ = store->Describe(step_prefix);
  // The tensors are read through a store that counts what they read.
  reader->counted_ = std::make_shared<layout::CountingKvStore>(store);
  store = reader->counted_;
  reader->store_ = store;
  reader->step_prefix_ = step_prefix;
  for (const IndexEntry& e : index.entries) {
    if (!e.is_tensor) continue;
    CAIRN_RETURN_IF_ERROR(CheckTensorPath(e.path, reader->url_));
    auto array = ZarrArray::Open(store, ArrayPrefix(step_prefix, e.path), ZarrFormat::kV2);
    if (!array.ok()) return array.status().Annotate("tensor `" + e.path + "` of " + reader->url_);
    const ArrayMetadata& m = (*array)->metadata();
    if (m.dtype != e.dtype || m.shape != e.shape) {
      return Status(StatusCode::kDataLoss,
                    "tensor `" + e.path + "` of " + reader->url_ + ": the index says " +
                        std::string(DTypeName(e.dtype)) + FormatTupleShape(e.shape) +
                        " but its .zarray says " + std::string(DTypeName(m.dtype)) +
                        FormatTupleShape(m.shape));
    }
    reader->arrays_.push_back({e.path, m.dtype, m.shape, m.chunk_shape, 0,
                               layout::SplitTreePath(e.path, '/'), m.chunk_shape});
    reader->zarr_[e.path] = *array;
  }
  CAIRN_RETURN_IF_ERROR(CountStoredBytes(*store, step_prefix, reader->arrays_));
  std::sort(reader->arrays_.begin(), reader->arrays_.end(),
            [](const layout::ArrayInfo& a, const layout::ArrayInfo& b) { return a.path < b.path; });
  return std::unique_ptr<layout::CheckpointReader>(std::move(reader));
}

namespace {

Result<std::unique_ptr<layout::CheckpointWriter>> NewWriter(
    std::shared_ptr<KvStore> store, std::string step_prefix,
    const std::vector<layout::ArrayInfo>& arrays, WriterOptions options, bool create) {
  step_prefix = WithSlash(std::move(step_prefix));
  const std::string index_key = step_prefix + std::string(kIndexFile);
  auto existing = store->Get(index_key, ByteRange::Range(0, 0));
  if (existing.ok() && existing->has_value()) {
    return Status(StatusCode::kAlreadyExists,
                  store->Describe(index_key) + " exists: the step is already committed");
  }
  auto writer = std::make_unique<AxlearnWriter>();
  bool resuming = false;
  if (create && !options.resume_token.empty()) {
    CAIRN_ASSIGN_OR_RETURN(resuming, TakeResumeToken(*store, step_prefix, options.resume_token));
    writer->has_token_ = true;
  }
  writer->store_ = store;
  writer->step_prefix_ = step_prefix;
  writer->index_.step = options.step;
  std::vector<layout::ArrayInfo> sorted = arrays;
  std::sort(sorted.begin(), sorted.end(),
            [](const layout::ArrayInfo& a, const layout::ArrayInfo& b) { return a.path < b.path; });
  for (const layout::ArrayInfo& a : sorted) {
    CAIRN_RETURN_IF_ERROR(CheckTensorPath(a.path, store->Describe(step_prefix)));
    Json chunks = Json::array();
    for (size_t d = 0; d < a.shape.size(); ++d) {
      Index c = d < a.write_shape.size() ? a.write_shape[d] : a.shape[d];
      chunks.push_back(std::max<Index>(1, c));
    }
    Json meta = {{"shape", a.shape},
                 {"chunks", chunks},
                 {"dtype", FormatZarr2DType(a.dtype)},
                 {"compressor", {{"id", "zstd"}, {"level", options.zstd_level}}}};
    CreateOptions create_options;
    create_options.overwrite = true;  // a re-run resumes an uncommitted step
    // JAX writes with a null fill value: every chunk is stored.
    create_options.store_data_equal_to_fill_value = true;
    if (resuming) {
      auto md = MetadataFromPartial(ZarrFormat::kV2, meta);
      if (md.ok()) {
        auto whole = StoredWhole(*store, ArrayPrefix(step_prefix, a.path), *md,
                                 md->ToJsonString(), a.shape, chunks);
        writer->complete_[a.path] = whole.ok() && *whole;
      }
    }
    OpenOptions open_options;
    open_options.format = ZarrFormat::kV2;
    open_options.store_data_equal_to_fill_value = true;
    auto z = create ? ZarrArray::Create(store, ArrayPrefix(step_prefix, a.path), ZarrFormat::kV2,
                                        meta, create_options)
                    : ZarrArray::Open(store, ArrayPrefix(step_prefix, a.path), open_options);
    if (!z.ok()) {
      return z.status().Annotate((create ? "creating tensor `" : "opening tensor `") + a.path + "`");
    }
    writer->zarr_[a.path] = *z;
    IndexEntry e;
    e.path = a.path;
    e.is_tensor = true;
    e.dtype = a.dtype;
    e.shape = a.shape;
    writer->index_.entries.push_back(std::move(e));
  }
  for (IndexEntry& e : options.other_entries) writer->index_.entries.push_back(std::move(e));
  std::stable_sort(writer->index_.entries.begin(), writer->index_.entries.end(),
                   [](const IndexEntry& a, const IndexEntry& b) { return a.path < b.path; });
  return std::unique_ptr<layout::CheckpointWriter>(std::move(writer));
}

}  // namespace

Result<std::unique_ptr<layout::CheckpointWriter>> CreateWriter(
    std::shared_ptr<KvStore> store, std::string step_prefix,
    const std::vector<layout::ArrayInfo>& arrays, WriterOptions options) {
  return NewWriter(std::move(store), std::move(step_prefix), arrays, std::move(options), true);
}

Result<std::unique_ptr<layout::CheckpointWriter>> AttachWriter(
    std::shared_ptr<KvStore> store, std::string step_prefix,
    const std::vector<layout::ArrayInfo>& arrays, WriterOptions options) {
  return NewWriter(std::move(store), std::move(step_prefix), arrays, std::move(options), false);
}

}  // namespace cairn::axlearn
