#include "cairn/layout/safetensors/safetensors_writer.h"

#include <cstdio>
#include <map>

#include "cairn/layout/safetensors/format/safetensors_header.h"
#include "cairn/layout/safetensors/safetensors_reader.h"
#include "cairn/util/json.h"

namespace cairn::safetensors {
namespace {

struct FilePlan {
  std::string key;
  std::string header_bytes;
  Header header;  // tensors in storage order
};

// Where a tensor lives: its file and its entry in that file.
struct TensorSlot {
  size_t file = 0;
  size_t index = 0;
};

class StreamingWriter final : public SafetensorsWriter {
 public:
  StreamingWriter(std::shared_ptr<KvStore> store, std::string prefix, std::vector<FilePlan> files,
                  bool sharded)
      : store_(std::move(store)), prefix_(std::move(prefix)), files_(std::move(files)),
        sharded_(sharded) {
    for (size_t f = 0; f < files_.size(); ++f) {
      for (size_t i = 0; i < files_[f].header.tensors.size(); ++i) {
        order_.push_back(files_[f].header.tensors[i].name);
        slots_[order_.back()] = {f, i};
      }
    }
  }

  std::string_view format() const override { return "safetensors"; }
  const std::vector<std::string>& write_order() const override { return order_; }
  std::vector<std::string> file_keys() const override {
    std::vector<std::string> keys;
    for (const FilePlan& f : files_) keys.push_back(f.key);
    return keys;
  }

  Status WriteBox(std::string_view path, const Box& box, const void* src) override {
    auto it = slots_.find(std::string(path));
    if (it == slots_.end()) {
      return Status(StatusCode::kNotFound, "no tensor `" + std::string(path) +
                                               "` declared for " + store_->url());
    }
    const TensorSlot slot = it->second;
    const TensorEntry& t = files_[slot.file].header.tensors[slot.index];
    const std::string what = "tensor `" + t.name + "` of " + store_->Describe(files_[slot.file].key);
    CAIRN_RETURN_IF_ERROR(layout::CheckBoxInArray(box, t.shape, what));
    if (box.empty()) return Status::OK();
    CAIRN_RETURN_IF_ERROR(MoveTo(slot, what));
    // The box must be the next bytes of the tensor: one contiguous slab.
    const size_t elem = DTypeSize(t.dtype);
    const std::vector<Index> strides = CStrides(t.shape, elem);
    uint64_t offset = 0;
    for (size_t d = 0; d < t.shape.size(); ++d) offset += box.origin[d] * strides[d];
    const uint64_t bytes = static_cast<uint64_t>(box.num_elements()) * elem;
    bool contiguous = true;
    size_t k = 0;
    while (k < t.shape.size() && box.shape[k] == 1) ++k;
    for (size_t d = k + 1; d < t.shape.size(); ++d) contiguous &= box.shape[d] == t.shape[d];
    if (!contiguous || offset != written_in_tensor_) {
      return Status(StatusCode::kFailedPrecondition,
                    what + ": box " + box.ToString() +
                        " is not the next contiguous slab of the tensor (safetensors is written "
                        "front to back; expected bytes from offset " +
                        std::to_string(written_in_tensor_) + ")");
    }
    CAIRN_RETURN_IF_ERROR(writer_->Append(ByteView(static_cast<const uint8_t*>(src), bytes))
                              .Annotate("writing " + what));
    written_in_tensor_ += bytes;
    return Status::OK();
  }

  Status Commit() override {
    // Step 2: every byte written (this also finishes the last file: step 1).
    CAIRN_RETURN_IF_ERROR(MoveTo({files_.size(), 0}, "commit"));
    if (!sharded_) return Status::OK();
    // Step 3: the index, last.
    Json index;
    uint64_t total = 0;
    Json weight_map = Json::object();
    for (const FilePlan& f : files_) {
      std::string name = f.key.substr(prefix_.size());
      for (const TensorEntry& t : f.header.tensors) {
        weight_map[t.name] = name;
        total += t.num_bytes();
      }
    }
    index["metadata"] = {{"total_size", total}};
    index["weight_map"] = std::move(weight_map);
    const std::string text = index.dump(2) + "\n";
    const std::string key = prefix_ + std::string(kIndexFile);
    return store_->Put(key, AsBytes(text)).Annotate("writing " + store_->Describe(key));
  }

 private:
  static bool Before(TensorSlot a, TensorSlot b) {
    return a.file != b.file ? a.file < b.file : a.index < b.index;
  }

  // Advances to `target` (a tensor, or {files_.size(), 0} for the end),
  // requiring every tensor before it to be complete; opens and commits
  // files on the way (protocol step 1).
  Status MoveTo(TensorSlot target, std::string_view what) {
    if (Before(target, cursor_)) {
      return Status(StatusCode::kFailedPrecondition,
                    std::string(what) + ": the tensor is already complete; safetensors is "
                                        "written in storage order (see write_order())");
    }
    while (Before(cursor_, target) && cursor_.file < files_.size()) {
      const FilePlan& f = files_[cursor_.file];
      CAIRN_RETURN_IF_ERROR(OpenFile());
      if (cursor_.index < f.header.tensors.size()) {
        const TensorEntry& t = f.header.tensors[cursor_.index];
        if (written_in_tensor_ != t.num_bytes()) {
          return Status(StatusCode::kFailedPrecondition,
                        std::string(what) + ": tensor `" + t.name + "` of " +
                            store_->Describe(f.key) + " is incomplete (" +
                            std::to_string(written_in_tensor_) + " of " +
                            std::to_string(t.num_bytes()) +
                            " bytes written); safetensors is written in storage order");
        }
        written_in_tensor_ = 0;
        ++cursor_.index;
        continue;
      }
      CAIRN_RETURN_IF_ERROR(writer_->Commit().Annotate("committing " + store_->Describe(f.key)));
      writer_.reset();
      ++cursor_.file;
      cursor_.index = 0;
    }
    if (cursor_.file < files_.size()) CAIRN_RETURN_IF_ERROR(OpenFile());
    return Status::OK();
  }

  Status OpenFile() {
    if (writer_ != nullptr) return Status::OK();
    const FilePlan& f = files_[cursor_.file];
    auto opened = store_->OpenWriter(f.key);
    if (!opened.ok()) return opened.status().Annotate("creating " + store_->Describe(f.key));
    writer_ = std::move(*opened);
    return writer_->Append(AsBytes(f.header_bytes)).Annotate("writing " + store_->Describe(f.key));
  }

  std::shared_ptr<KvStore> store_;
  std::string prefix_;
  std::vector<FilePlan> files_;
  bool sharded_;
  std::vector<std::string> order_;
  std::map<std::string, TensorSlot> slots_;
  TensorSlot cursor_;
  uint64_t written_in_tensor_ = 0;
  std::unique_ptr<KvWriter> writer_;
};

}  // namespace

Result<std::unique_ptr<SafetensorsWriter>> CreateWriter(std::shared_ptr<KvStore> store,
                                                        std::string prefix,
                                                        const std::vector<layout::ArrayInfo>& arrays,
                                                        WriterOptions options) {
  if (!prefix.empty() && prefix.back() != '/') prefix += '/';
  std::vector<TensorSpec> specs;
  for (const layout::ArrayInfo& a : arrays) specs.push_back({a.path, a.dtype, a.shape});
  // One header over everything gives the package's storage order, and checks
  // names, dtypes and shapes.
  CAIRN_ASSIGN_OR_RETURN(BuiltHeader whole, BuildHeader(specs, options.metadata));
  std::vector<std::vector<TensorSpec>> groups;
  if (options.max_file_bytes == 0) {
    groups.push_back(specs);
  } else {
    uint64_t in_group = 0;
    for (const TensorEntry& e : whole.header.tensors) {
      if (groups.empty() || (in_group > 0 && in_group + e.num_bytes() > options.max_file_bytes)) {
        groups.emplace_back();
        in_group = 0;
      }
      groups.back().push_back({e.name, e.dtype, e.shape});
      in_group += e.num_bytes();
    }
    if (groups.empty()) groups.emplace_back();
  }
  std::vector<FilePlan> files;
  for (size_t g = 0; g < groups.size(); ++g) {
    std::string name = options.file_name;
    if (options.max_file_bytes != 0) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", g + 1, groups.size());
      name = buf;
    }
    CAIRN_ASSIGN_OR_RETURN(BuiltHeader built, BuildHeader(groups[g], options.metadata));
    files.push_back({prefix + name, std::move(built.bytes), std::move(built.header)});
  }
  return std::unique_ptr<SafetensorsWriter>(new StreamingWriter(
      std::move(store), std::move(prefix), std::move(files), options.max_file_bytes != 0));
}

}  // namespace cairn::safetensors
