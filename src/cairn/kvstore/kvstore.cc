#include "cairn/kvstore/kvstore.h"

#include <algorithm>
#include <cstring>

#include "cairn/util/hex.h"

namespace cairn {

std::string ByteRange::ToString() const {
  if (suffix) return "last " + std::to_string(length.value_or(0)) + " bytes";
  std::string s = "bytes [" + std::to_string(offset) + ", ";
  s += length ? std::to_string(offset + *length) : std::string("end");
  return s + ")";
}

Result<std::pair<uint64_t, uint64_t>> ResolveByteRange(const ByteRange& range, uint64_t size) {
  if (range.suffix) {
    uint64_t n = range.length.value_or(0);
    if (n > size) {
      return InvalidArgumentError("byte range " + range.ToString() + " exceeds value size " +
                                  std::to_string(size));
    }
    return std::make_pair(size - n, size);
  }
  if (range.offset > size) {
    return InvalidArgumentError("byte range " + range.ToString() + " exceeds value size " +
                                std::to_string(size));
  }
  uint64_t end = size;
  if (range.length) {
    if (*range.length > size - range.offset) {
      return InvalidArgumentError("byte range " + range.ToString() + " exceeds value size " +
                                  std::to_string(size));
    }
    end = range.offset + *range.length;
  }
  return std::make_pair(range.offset, end);
}

Result<bool> KvStore::GetInto(std::string_view key, MutableByteView dst) {
  CAIRN_ASSIGN_OR_RETURN(std::optional<Buffer> value, Get(key));
  if (!value) return false;
  if (value->size() != dst.size()) {
    return DataLossError("reading " + Describe(key) + ": value has " +
                         std::to_string(value->size()) + " bytes, expected " +
                         std::to_string(dst.size()));
  }
  if (!dst.empty()) std::memcpy(dst.data(), value->data(), dst.size());
  return true;
}

Result<std::optional<Buffer>> KvStore::GetAtMost(std::string_view key, uint64_t max_bytes) {
  CAIRN_ASSIGN_OR_RETURN(std::optional<Buffer> value, Get(key));
  if (value && value->size() > max_bytes) {
    return ResourceExhaustedError("reading " + Describe(key) + ": the value has " + std::to_string(value->size()) +
                                  " bytes, over the limit of " + std::to_string(max_bytes));
  }
  return value;
}

Status KvStore::GetMany(const std::vector<KeyRead>& reads, const KeyReadFn& fn) {
  for (size_t i = 0; i < reads.size(); ++i) {
    const KeyRead& r = reads[i];
    CAIRN_ASSIGN_OR_RETURN(std::optional<Buffer> value, r.max_bytes != 0 && r.range.IsAll()
                                                            ? GetAtMost(r.key, r.max_bytes)
                                                            : Get(r.key, r.range));
    CAIRN_RETURN_IF_ERROR(value ? fn(i, value->view()) : fn(i, std::nullopt));
  }
  return Status::OK();
}

Status KvStore::ApplyBatch(std::vector<KvMutation> mutations) {
  for (auto& m : mutations) {
    if (m.value) {
      CAIRN_RETURN_IF_ERROR(Put(m.key, m.value->view()));
    } else {
      CAIRN_RETURN_IF_ERROR(Delete(m.key));
    }
  }
  return Status::OK();
}

Result<bool> KvStore::CompareAndPut(std::string_view key, std::optional<ByteView>, ByteView) {
  return UnimplementedError("CompareAndPut of " + Describe(key) +
                            ": this kvstore driver has no atomic compare-and-swap");
}

Status KvStore::DeletePrefix(std::string_view prefix) {
  CAIRN_ASSIGN_OR_RETURN(auto keys, List(prefix));
  for (const auto& k : keys) CAIRN_RETURN_IF_ERROR(Delete(k.key));
  return Status::OK();
}

namespace {

// The default KvWriter: the value in memory, one Put on Commit.
//
// A large value grows in large steps: an OCDBT data file on an object store
// (tens of MiB of 2 MiB chunks, each appended here) doubled from its first
// chunk's size, copying what it held at every step (62 MiB of copies and
// 126 MiB of blocks for a 64 MiB file, on top of the chunks' own copy); it now
// takes a block of at least kLargeStep as soon as it passes kLargeFrom, then
// doubles. A block larger than what gets written costs address space only
// (pages are faulted in when written) or comes from Buffer's block cache.
class BufferedKvWriter : public KvWriter {
 public:
  static constexpr size_t kLargeFrom = size_t{1} << 20;
  static constexpr size_t kLargeStep = size_t{64} << 20;

  BufferedKvWriter(KvStore* store, std::string key) : store_(store), key_(std::move(key)) {}
  Status Append(ByteView bytes) override {
    if (committed_) {
      return FailedPreconditionError("append after commit of " + store_->Describe(key_));
    }
    const size_t need = data_.size() + bytes.size();
    if (need > data_.capacity() && need >= kLargeFrom) {
      data_.reserve(std::max({need, data_.capacity() * 2, kLargeStep}));
    }
    data_.append(bytes);
    return Status::OK();
  }
  Status Commit() override {
    if (committed_) return FailedPreconditionError("second commit of " + store_->Describe(key_));
    committed_ = true;
    return store_->Put(key_, data_.view());
  }
  uint64_t size() const override { return data_.size(); }

 private:
  KvStore* store_;
  std::string key_;
  Buffer data_;
  bool committed_ = false;
};

}  // namespace

Result<std::unique_ptr<KvWriter>> KvStore::OpenWriter(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key));
  return std::unique_ptr<KvWriter>(std::make_unique<BufferedKvWriter>(this, std::string(key)));
}

std::string KvStore::Describe(std::string_view key) const {
  std::string s = "key `";
  s += Printable(key);
  s += "` of ";
  s += url();
  return s;
}

Status ValidateKey(std::string_view key) {
  auto bad = [&](std::string_view why) {
    return InvalidArgumentError("invalid key `" + Printable(key.substr(0, 1024)) + "`" +
                                (key.size() > 1024 ? " (" + std::to_string(key.size()) + " bytes)" : "") +
                                ": " + std::string(why));
  };
  if (key.empty()) return bad("empty");
  if (key.front() == '/') return bad("absolute path");
  if (key.find('\0') != std::string_view::npos) return bad("contains a NUL byte");
  size_t start = 0;
  while (start <= key.size()) {
    size_t end = key.find('/', start);
    if (end == std::string_view::npos) end = key.size();
    std::string_view comp = key.substr(start, end - start);
    if (comp == "." || comp == "..") return bad("contains a `.` or `..` component");
    start = end + 1;
  }
  return Status::OK();
}

}  // namespace cairn
