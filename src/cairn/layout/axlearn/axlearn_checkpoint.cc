#include "cairn/layout/axlearn/axlearn_checkpoint.h"

#include <algorithm>
#include <map>

#include "cairn/zarr/array.h"

namespace cairn::axlearn {
namespace {

std::string WithSlash(std::string prefix) {
  if (!prefix.empty() && prefix.back() != '/') prefix += '/';
  return prefix;
}

std::string ArrayPrefix(const std::string& step_prefix, const std::string& path) {
  return step_prefix + "gda/" + path + "/";
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

  std::string url_;
  std::vector<layout::ArrayInfo> arrays_;
  std::map<std::string, std::shared_ptr<ZarrArray>> zarr_;
};

class AxlearnWriter final : public layout::CheckpointWriter {
 public:
  std::string_view format() const override { return "axlearn"; }

  Status WriteBox(std::string_view path, const Box& box, const void* src) override {
    auto it = zarr_.find(std::string(path));
    if (it == zarr_.end()) {
      return Status(StatusCode::kNotFound,
                    "no tensor `" + std::string(path) + "` declared for " + store_->url());
    }
    return it->second->Write(box, src).Annotate("tensor `" + std::string(path) + "`");
  }

  Status Commit() override {
    const std::string key = step_prefix_ + std::string(kIndexFile);
    return store_->Put(key, AsBytes(FormatIndex(index_))).Annotate("writing " + store_->Describe(key));
  }

  std::shared_ptr<KvStore> store_;
  std::string step_prefix_;
  StepIndex index_;
  std::map<std::string, std::shared_ptr<ZarrArray>> zarr_;
};

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
                               layout::SplitTreePath(e.path, '/')});
    reader->zarr_[e.path] = *array;
  }
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
