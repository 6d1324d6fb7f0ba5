#include "cairn/kvstore/ocdbt/io/data_file_writer.h"

#include <algorithm>
#include <random>
#include <vector>

namespace cairn::ocdbt {

std::string NewDataFileName(std::string_view prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}() ^
                                   (uint64_t{std::random_device{}()} << 32)};
  static constexpr char kHex[] = "0123456789abcdef";
  std::string name(prefix);
  for (int i = 0; i < 2; ++i) {
    uint64_t v = rng();
    for (int j = 0; j < 16; ++j) name.push_back(kHex[(v >> (4 * j)) & 0xf]);
  }
  return name;
}

DataFileWriter::DataFileWriter(KvStore* base, std::string prefix, uint64_t target_size,
                               uint64_t value_alignment)
    : base_(base), prefix_(std::move(prefix)), target_size_(target_size), value_alignment_(value_alignment) {}

Status DataFileWriter::Start() {
  DataFileId id{"", NewDataFileName(prefix_)};
  CAIRN_ASSIGN_OR_RETURN(open_, base_->OpenWriter(id.relative_path));
  files_.push_back(std::move(id));
  return Status::OK();
}

Result<IndirectDataReference> DataFileWriter::Append(ByteView bytes) {
  if (open_ && target_size_ != 0 && open_->size() != 0 &&
      open_->size() + bytes.size() > target_size_) {
    CAIRN_RETURN_IF_ERROR(RollOver());
  }
  if (!open_) CAIRN_RETURN_IF_ERROR(Start());
  if (value_alignment_ != 0 && bytes.size() >= value_alignment_ && open_->size() % value_alignment_ != 0) {
    static const std::vector<uint8_t> kZeros(uint64_t{64} << 10, 0);
    uint64_t pad = value_alignment_ - open_->size() % value_alignment_;
    while (pad > 0) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(pad, kZeros.size()));
      CAIRN_RETURN_IF_ERROR(open_->Append(ByteView(kZeros.data(), n)).Annotate(
          "writing OCDBT data file " + base_->Describe(files_.back().relative_path)));
      bytes_written_ += n;
      pad -= n;
    }
  }
  IndirectDataReference ref{files_.back(), open_->size(), bytes.size()};
  CAIRN_RETURN_IF_ERROR(open_->Append(bytes).Annotate(
      "writing OCDBT data file " + base_->Describe(files_.back().relative_path)));
  bytes_written_ += bytes.size();
  return ref;
}

Status DataFileWriter::RollOver() {
  if (!open_) return Status::OK();
  if (!full_file_handler_) return Finish();
  std::unique_ptr<KvWriter> file = std::move(open_);
  return full_file_handler_(std::move(file), files_.back());
}

Status DataFileWriter::Finish() {
  if (!open_) return Status::OK();
  Status st = open_->Commit().Annotate("writing OCDBT data file " +
                                       base_->Describe(files_.back().relative_path));
  open_.reset();
  return st;
}

}  // namespace cairn::ocdbt
