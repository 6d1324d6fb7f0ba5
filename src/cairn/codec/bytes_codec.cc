#include "cairn/codec/bytes_codec.h"

#include <bit>
#include <cstring>

#include "cairn/util/json.h"

namespace cairn {

Result<std::shared_ptr<const BytesArrayCodec>> BytesArrayCodec::FromJson(
    const Json* configuration, const ChunkSpec& spec) {
  Endian parsed = Endian::kLittle;
  bool has_endian = false;
  if (configuration != nullptr) {
    CAIRN_RETURN_IF_ERROR(CheckOnlyMembers(*configuration, {"endian"}, "bytes codec"));
    if (const Json* e = FindField(*configuration, "endian")) {
      CAIRN_ASSIGN_OR_RETURN(std::string s, JsonToString(*e, "bytes codec endian"));
      has_endian = true;
      if (s == "little") {
        parsed = Endian::kLittle;
      } else if (s == "big") {
        parsed = Endian::kBig;
      } else {
        return InvalidArgumentError("bytes codec: endian must be \"little\" or \"big\", got \"" +
                                    s + "\"");
      }
    }
  }
  if (DTypeSize(spec.dtype) == 1) {
    // Irrelevant, and TensorStore omits it.
    return std::make_shared<const BytesArrayCodec>(std::nullopt);
  }
  if (!has_endian) {
    return InvalidArgumentError(std::string("bytes codec: \"endian\" is required for data type ") +
                                std::string(DTypeName(spec.dtype)));
  }
  return std::make_shared<const BytesArrayCodec>(parsed);
}

Json BytesArrayCodec::ToJson() const {
  Json j = {{"name", "bytes"}};
  if (endian_) {
    j["configuration"] = {{"endian", *endian_ == Endian::kLittle ? "little" : "big"}};
  }
  return j;
}

bool BytesArrayCodec::NeedsSwap(const ChunkSpec& spec) const {
  if (!endian_ || GetDTypeInfo(spec.dtype).swap_unit <= 1) return false;
  const bool big = *endian_ == Endian::kBig;
  return big != (std::endian::native == std::endian::big);
}

bool BytesArrayCodec::IsIdentity(const ChunkSpec& spec) const { return !NeedsSwap(spec); }

Result<Buffer> BytesArrayCodec::Encode(const ChunkSpec& spec, ByteView array) const {
  if (array.size() != spec.num_bytes()) {
    return InvalidArgumentError("bytes codec: array has " + std::to_string(array.size()) +
                                " bytes, expected " + std::to_string(spec.num_bytes()));
  }
  Buffer out = Buffer::CopyOf(array);
  if (NeedsSwap(spec)) {
    SwapEndianInPlace(out.data(), out.size(), GetDTypeInfo(spec.dtype).swap_unit);
  }
  return out;
}

Result<Buffer> BytesArrayCodec::Decode(const ChunkSpec& spec, ByteView encoded) const {
  if (encoded.size() != spec.num_bytes()) {
    return DataLossError("bytes codec: chunk has " + std::to_string(encoded.size()) +
                         " bytes, expected " + std::to_string(spec.num_bytes()));
  }
  Buffer out = Buffer::CopyOf(encoded);
  if (NeedsSwap(spec)) {
    SwapEndianInPlace(out.data(), out.size(), GetDTypeInfo(spec.dtype).swap_unit);
  }
  return out;
}

}  // namespace cairn
