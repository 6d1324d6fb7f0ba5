#include "cairn/codec/transpose_codec.h"

#include "cairn/util/json.h"

namespace cairn {

Result<std::shared_ptr<const TransposeCodec>> TransposeCodec::FromJson(const Json* configuration,
                                                                       const ChunkSpec& spec) {
  if (configuration == nullptr) {
    return InvalidArgumentError("transpose codec: missing configuration with \"order\"");
  }
  CAIRN_RETURN_IF_ERROR(CheckOnlyMembers(*configuration, {"order"}, "transpose codec"));
  CAIRN_ASSIGN_OR_RETURN(const Json* order_json, GetField(*configuration, "order"));
  const int64_t rank = static_cast<int64_t>(spec.shape.size());
  std::vector<int64_t> order;
  if (order_json->is_string()) {
    const std::string s = order_json->get<std::string>();
    if (s != "C" && s != "F") {
      return InvalidArgumentError("transpose codec: order must be a permutation, \"C\" or \"F\"" +
                                  std::string(", got \"") + s + "\"");
    }
    for (int64_t i = 0; i < rank; ++i) order.push_back(s == "C" ? i : rank - 1 - i);
  } else {
    CAIRN_ASSIGN_OR_RETURN(order, JsonToIntVector(*order_json, "transpose codec order"));
  }
  if (static_cast<int64_t>(order.size()) != rank) {
    return InvalidArgumentError("transpose codec: order has " + std::to_string(order.size()) +
                                " entries, the chunk has rank " + std::to_string(rank));
  }
  std::vector<bool> seen(order.size(), false);
  for (int64_t p : order) {
    if (p < 0 || p >= rank || seen[p]) {
      return InvalidArgumentError("transpose codec: order " + DumpJson(*order_json) +
                                  " is not a permutation of 0.." + std::to_string(rank - 1));
    }
    seen[p] = true;
  }
  return std::make_shared<const TransposeCodec>(std::move(order));
}

Json TransposeCodec::ToJson() const {
  return {{"name", "transpose"}, {"configuration", {{"order", order_}}}};
}

ChunkSpec TransposeCodec::EncodedSpec(const ChunkSpec& decoded) const {
  ChunkSpec e = decoded;
  for (size_t i = 0; i < order_.size(); ++i) e.shape[i] = decoded.shape[order_[i]];
  return e;
}

Result<Buffer> TransposeCodec::Encode(const ChunkSpec& decoded, ByteView array) const {
  if (array.size() != decoded.num_bytes() || order_.size() != decoded.shape.size()) {
    return InvalidArgumentError("transpose codec: array does not match the chunk spec");
  }
  const size_t es = DTypeSize(decoded.dtype);
  const Shape encoded_shape = EncodedSpec(decoded).shape;
  const std::vector<Index> dec_strides = CStrides(decoded.shape, es);
  std::vector<Index> src_strides(order_.size());
  for (size_t i = 0; i < order_.size(); ++i) src_strides[i] = dec_strides[order_[i]];
  Buffer out(array.size());
  StridedCopy(array.data(), src_strides, out.data(), CStrides(encoded_shape, es), encoded_shape,
              es);
  return out;
}

Result<Buffer> TransposeCodec::Decode(const ChunkSpec& decoded, ByteView encoded) const {
  if (encoded.size() != decoded.num_bytes() || order_.size() != decoded.shape.size()) {
    return DataLossError("transpose codec: encoded array has " + std::to_string(encoded.size()) +
                         " bytes, expected " + std::to_string(decoded.num_bytes()));
  }
  const size_t es = DTypeSize(decoded.dtype);
  const Shape encoded_shape = EncodedSpec(decoded).shape;
  const std::vector<Index> dec_strides = CStrides(decoded.shape, es);
  std::vector<Index> dst_strides(order_.size());
  for (size_t i = 0; i < order_.size(); ++i) dst_strides[i] = dec_strides[order_[i]];
  Buffer out(encoded.size());
  StridedCopy(encoded.data(), CStrides(encoded_shape, es), out.data(), dst_strides, encoded_shape,
              es);
  return out;
}

}  // namespace cairn
