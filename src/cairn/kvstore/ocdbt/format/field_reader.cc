#include "cairn/kvstore/ocdbt/format/field_reader.h"

namespace cairn::ocdbt {

Status FieldReader::Error(std::string_view message) const {
  std::string s = what_;
  s += ": ";
  s += message;
  s += " (at byte " + std::to_string(reader_.position()) + ")";
  return DataLossError(std::move(s));
}

namespace {
std::string Truncated(std::string_view field) {
  return StrCat("truncated or invalid `", field, "`");
}
}  // namespace

Status FieldReader::Byte(uint8_t* v, std::string_view field) {
  if (!reader_.ReadByte(v)) return Error(Truncated(field));
  return Status::OK();
}

Status FieldReader::LE32(uint32_t* v, std::string_view field) {
  if (!reader_.ReadLE32(v)) return Error(Truncated(field));
  return Status::OK();
}

Status FieldReader::LE64(uint64_t* v, std::string_view field) {
  if (!reader_.ReadLE64(v)) return Error(Truncated(field));
  return Status::OK();
}

Status FieldReader::Varint64(uint64_t* v, std::string_view field) {
  if (!reader_.ReadVarint64(v)) return Error(Truncated(field));
  return Status::OK();
}

Status FieldReader::Varint32(uint32_t* v, std::string_view field) {
  if (!reader_.ReadVarint32(v)) return Error(Truncated(field));
  return Status::OK();
}

Status FieldReader::Varint16(uint32_t* v, std::string_view field) {
  CAIRN_RETURN_IF_ERROR(Varint32(v, field));
  if (*v > 65535) {
    return Error(StrCat("`", field, "` = ", std::to_string(*v), " exceeds 65535"));
  }
  return Status::OK();
}

Status FieldReader::Bytes(uint64_t n, ByteView* out, std::string_view field) {
  if (n > reader_.remaining() || !reader_.ReadBytes(static_cast<size_t>(n), out)) {
    return Error(StrCat("`", field, "` needs ", std::to_string(n), " bytes, only ",
                        std::to_string(reader_.remaining()), " remain"));
  }
  return Status::OK();
}

Status FieldReader::CheckCount(uint64_t count, uint64_t min_bytes_each,
                               std::string_view field) {
  uint64_t avail = reader_.remaining();
  if (min_bytes_each == 0) min_bytes_each = 1;
  if (count > avail / min_bytes_each) {
    return Error(StrCat("`", field, "` = ", std::to_string(count), " is more than the ",
                        std::to_string(avail), " remaining bytes can hold"));
  }
  return Status::OK();
}

Status FieldReader::ExpectEnd() {
  if (!reader_.empty()) {
    return Error(std::to_string(reader_.remaining()) + " unexpected trailing bytes");
  }
  return Status::OK();
}

}  // namespace cairn::ocdbt
