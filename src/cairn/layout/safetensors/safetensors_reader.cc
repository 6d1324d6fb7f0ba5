#include "cairn/layout/safetensors/safetensors_reader.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>

#include "cairn/layout/safetensors/format/safetensors_header.h"
#include "cairn/util/json.h"

namespace cairn::safetensors {
namespace {

// A read that touches at most this many bytes it does not need, per byte it
// needs, is done as one ranged read of the enclosing span.
constexpr uint64_t kMaxSpanWaste = 2;
constexpr uint64_t kMaxSpanBytes = 64 << 20;

struct Located {
  std::string key;        // the file
  uint64_t data_start = 0;
  TensorEntry entry;
};

Result<uint64_t> FileSize(KvStore& store, const std::string& key) {
  auto listed = store.List(key);
  if (!listed.ok()) return listed.status().Annotate("listing " + store.Describe(key));
  for (const KeyInfo& k : *listed) {
    if (k.key == key) return k.size;
  }
  return Status(StatusCode::kNotFound, "no safetensors file at " + store.Describe(key));
}

Result<Buffer> ReadRange(KvStore& store, const std::string& key, uint64_t offset, uint64_t n) {
  auto got = store.Get(key, ByteRange::Range(offset, n));
  if (!got.ok()) return got.status().Annotate("reading " + store.Describe(key));
  if (!*got) return Status(StatusCode::kNotFound, store.Describe(key) + " vanished while reading");
  if ((*got)->size() != n) {
    return Status(StatusCode::kDataLoss, store.Describe(key) + ": short read");
  }
  return std::move(**got);
}

Result<Header> ReadFileHeader(KvStore& store, const std::string& key) {
  CAIRN_ASSIGN_OR_RETURN(uint64_t size, FileSize(store, key));
  const std::string what = store.Describe(key);
  if (size < kLengthPrefixBytes) return ParseHeaderLength({}, size, what).status();
  CAIRN_ASSIGN_OR_RETURN(Buffer prefix, ReadRange(store, key, 0, kLengthPrefixBytes));
  CAIRN_ASSIGN_OR_RETURN(uint64_t n, ParseHeaderLength(ByteView(prefix.data(), prefix.size()),
                                                       size, what));
  CAIRN_ASSIGN_OR_RETURN(Buffer json, ReadRange(store, key, kLengthPrefixBytes, n));
  return ParseHeader(std::string_view(reinterpret_cast<const char*>(json.data()), json.size()),
                     size, what);
}

class SafetensorsReader final : public layout::CheckpointReader {
 public:
  SafetensorsReader(std::shared_ptr<KvStore> store, std::map<std::string, Located> tensors)
      : store_(std::move(store)), tensors_(std::move(tensors)) {
    for (const auto& [name, t] : tensors_) {
      arrays_.push_back({name, t.entry.dtype, t.entry.shape, t.entry.shape, t.entry.num_bytes(),
                         layout::SplitTreePath(name, '.'), {}});
    }
  }

  std::string_view format() const override { return "safetensors"; }
  const std::vector<layout::ArrayInfo>& arrays() const override { return arrays_; }

  Status ReadBox(std::string_view path, const Box& box, void* dest) override {
    auto it = tensors_.find(std::string(path));
    if (it == tensors_.end()) {
      return Status(StatusCode::kNotFound, "no tensor `" + std::string(path) + "` in " +
                                               store_->url());
    }
    const Located& t = it->second;
    const std::string what = "tensor `" + t.entry.name + "` of " + store_->Describe(t.key);
    CAIRN_RETURN_IF_ERROR(layout::CheckBoxInArray(box, t.entry.shape, what));
    if (box.empty()) return Status::OK();
    const size_t elem = DTypeSize(t.entry.dtype);
    const Shape& shape = t.entry.shape;
    const std::vector<Index> strides = CStrides(shape, elem);
    // The enclosing span of the box in the file.
    uint64_t first = 0, last = 0;
    for (size_t d = 0; d < shape.size(); ++d) {
      first += box.origin[d] * strides[d];
      last += (box.origin[d] + box.shape[d] - 1) * strides[d];
    }
    last += elem;
    const uint64_t needed = static_cast<uint64_t>(box.num_elements()) * elem;
    const uint64_t base = t.data_start + t.entry.begin;
    const uint64_t span = last - first;
    if (span == needed || (span <= kMaxSpanBytes && span <= kMaxSpanWaste * needed)) {
      CAIRN_ASSIGN_OR_RETURN(Buffer bytes, ReadRange(*store_, t.key, base + first, span));
      if (span == needed) {
        std::memcpy(dest, bytes.data(), needed);
      } else {
        StridedCopy(bytes.data(), strides, dest, CStrides(box.shape, elem), box.shape, elem);
      }
      return Status::OK();
    }
    return ReadRuns(t, box, strides, elem, static_cast<uint8_t*>(dest));
  }

 private:
  // One ranged read per contiguous run: the box covers whole rows from
  // dimension `k` on, so each run is box.shape[k] * strides[k] bytes.
  Status ReadRuns(const Located& t, const Box& box, const std::vector<Index>& strides,
                  size_t elem, uint8_t* dest) {
    const Shape& shape = t.entry.shape;
    size_t k = shape.size() - 1;
    while (k > 0 && box.shape[k] == shape[k]) --k;
    const uint64_t run = static_cast<uint64_t>(box.shape[k]) * strides[k];
    std::vector<Index> pos(box.origin.begin(), box.origin.begin() + k);
    const uint64_t base = t.data_start + t.entry.begin;
    for (;;) {
      uint64_t offset = box.origin[k] * strides[k];
      for (size_t d = 0; d < k; ++d) offset += pos[d] * strides[d];
      CAIRN_ASSIGN_OR_RETURN(Buffer bytes, ReadRange(*store_, t.key, base + offset, run));
      std::memcpy(dest, bytes.data(), run);
      dest += run;
      size_t d = k;
      while (d > 0) {
        --d;
        if (++pos[d] < box.origin[d] + box.shape[d]) break;
        pos[d] = box.origin[d];
        if (d == 0) return Status::OK();
      }
      if (k == 0) return Status::OK();
    }
  }

  std::shared_ptr<KvStore> store_;
  std::map<std::string, Located> tensors_;
  std::vector<layout::ArrayInfo> arrays_;
};

// `metadata` (may be null) gains the file's `__metadata__` entries that it
// does not hold yet.
Status AddFile(KvStore& store, const std::string& key, std::map<std::string, Located>& out,
               std::map<std::string, std::string>* metadata) {
  CAIRN_ASSIGN_OR_RETURN(Header header, ReadFileHeader(store, key));
  if (metadata != nullptr) metadata->insert(header.metadata.begin(), header.metadata.end());
  for (TensorEntry& e : header.tensors) {
    std::string name = e.name;
    auto [it, inserted] = out.emplace(name, Located{key, header.data_start, std::move(e)});
    if (!inserted) {
      return Status(StatusCode::kDataLoss, "tensor `" + name + "` is in both " +
                                               store.Describe(it->second.key) + " and " +
                                               store.Describe(key));
    }
  }
  return Status::OK();
}

// Reads the index and checks that every tensor it names is in its file.
Status AddIndexedFiles(KvStore& store, const std::string& index_key, const std::string& dir,
                       std::map<std::string, Located>& out,
                       std::map<std::string, std::string>* metadata) {
  CAIRN_ASSIGN_OR_RETURN(uint64_t size, FileSize(store, index_key));
  const std::string what = store.Describe(index_key);
  if (size > kMaxIndexBytes) {
    return Status(StatusCode::kDataLoss, what + " is " + std::to_string(size) +
                                             " bytes, over the limit of " +
                                             std::to_string(kMaxIndexBytes));
  }
  CAIRN_ASSIGN_OR_RETURN(Buffer bytes, ReadRange(store, index_key, 0, size));
  auto json = ParseJson(std::string_view(reinterpret_cast<const char*>(bytes.data()), size), what);
  if (!json.ok()) return Status(StatusCode::kDataLoss, std::string(json.status().message()));
  const Json* map = json->is_object() ? FindField(*json, "weight_map") : nullptr;
  if (map == nullptr || !map->is_object()) {
    return Status(StatusCode::kDataLoss, what + ": no `weight_map` object");
  }
  std::map<std::string, std::string> file_of;
  for (auto it = map->begin(); it != map->end(); ++it) {
    if (!it->is_string()) {
      return Status(StatusCode::kDataLoss, what + ": weight_map value of `" + it.key() +
                                               "` is not a file name");
    }
    std::string file = it->get<std::string>();
    if (file.empty() || file.find('/') != std::string::npos || file == "." || file == "..") {
      return Status(StatusCode::kDataLoss, what + ": weight_map names the file `" + file +
                                               "`, which is not a file beside the index");
    }
    file_of[it.key()] = dir + file;
  }
  std::map<std::string, bool> files;
  for (const auto& [name, file] : file_of) files[file] = true;
  std::map<std::string, Located> all;
  for (const auto& [file, unused] : files) CAIRN_RETURN_IF_ERROR(AddFile(store, file, all, metadata));
  for (const auto& [name, file] : file_of) {
    auto it = all.find(name);
    if (it == all.end() || it->second.key != file) {
      return Status(StatusCode::kDataLoss, what + ": weight_map puts `" + name + "` in " + file +
                                               ", which does not hold it");
    }
    out.emplace(name, std::move(it->second));
  }
  return Status::OK();
}

bool EndsWith(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

// "model-00001-of-00003.safetensors": a file of a sharded set, named as
// the safetensors writers of Hugging Face (and cairn) name them.
bool IsShardFileName(std::string_view name) {
  if (!EndsWith(name, kFileSuffix)) return false;
  name.remove_suffix(kFileSuffix.size());
  auto digits_at_end = [&](std::string_view& s) {
    size_t n = 0;
    while (n < s.size() && std::isdigit(static_cast<unsigned char>(s[s.size() - 1 - n]))) ++n;
    s.remove_suffix(n);
    return n > 0;
  };
  if (!digits_at_end(name) || !EndsWith(name, "-of-")) return false;
  name.remove_suffix(4);
  return digits_at_end(name) && EndsWith(name, "-");
}

}  // namespace

Result<std::unique_ptr<layout::CheckpointReader>> OpenReader(
    std::shared_ptr<KvStore> store, std::string location, std::map<std::string, std::string>* metadata) {
  std::map<std::string, Located> tensors;
  if (EndsWith(location, kFileSuffix)) {
    CAIRN_RETURN_IF_ERROR(AddFile(*store, location, tensors, metadata));
  } else if (EndsWith(location, ".index.json")) {
    std::string dir = location.substr(0, location.rfind('/') + 1);
    if (location.find('/') == std::string::npos) dir.clear();
    CAIRN_RETURN_IF_ERROR(AddIndexedFiles(*store, location, dir, tensors, metadata));
  } else {
    if (!location.empty() && location.back() != '/') location += '/';
    auto listed = store->List(location);
    if (!listed.ok()) return listed.status().Annotate("listing " + store->Describe(location));
    const std::string index = location + std::string(kIndexFile);
    bool has_index = std::any_of(listed->begin(), listed->end(),
                                 [&](const KeyInfo& k) { return k.key == index; });
    if (has_index) {
      CAIRN_RETURN_IF_ERROR(AddIndexedFiles(*store, index, location, tensors, metadata));
    } else {
      // A set's files without any index are an incomplete set (its writer
      // commits the index last), not a checkpoint.
      const bool any_index = std::any_of(listed->begin(), listed->end(), [](const KeyInfo& k) {
        return EndsWith(k.key, ".safetensors.index.json");
      });
      bool any = false;
      for (const KeyInfo& k : *listed) {
        std::string_view rest = std::string_view(k.key).substr(location.size());
        if (rest.find('/') != std::string_view::npos || !EndsWith(rest, kFileSuffix)) continue;
        if (!any_index && IsShardFileName(rest)) {
          return Status(StatusCode::kDataLoss,
                        store->Describe(k.key) + " is a file of a sharded set, but " +
                            store->Describe(index) +
                            " is missing: the set is incomplete (an interrupted write?)");
        }
        any = true;
        CAIRN_RETURN_IF_ERROR(AddFile(*store, k.key, tensors, metadata));
      }
      if (!any) {
        return Status(StatusCode::kNotFound, "no safetensors files or " + std::string(kIndexFile) +
                                                 " at " + store->Describe(location));
      }
    }
  }
  return std::unique_ptr<layout::CheckpointReader>(
      new SafetensorsReader(std::move(store), std::move(tensors)));
}

}  // namespace cairn::safetensors
