// The zarr v2 `.zarray` document, as TensorStore's `zarr` driver reads and
// writes it, and its equivalent codec chain.
#include <algorithm>
#include <string>

#include "cairn/codec/bytes_codec.h"
#include "cairn/codec/transpose_codec.h"
#include "cairn/codec/zarr2_compressor.h"
#include "cairn/zarr/fill_value.h"
#include "cairn/zarr/metadata_internal.h"

namespace cairn::internal_zarr {

Result<ArrayMetadata> ParseV2(const Json& j, bool allow_extra_members) {
  ArrayMetadata m;
  m.format = ZarrFormat::kV2;
  CAIRN_ASSIGN_OR_RETURN(int64_t zarr_format, GetIntField(j, "zarr_format"));
  if (zarr_format != 2) {
    return InvalidArgumentError("zarr_format: expected 2, got " + std::to_string(zarr_format));
  }
  CAIRN_ASSIGN_OR_RETURN(const Json* shape, GetField(j, "shape"));
  CAIRN_ASSIGN_OR_RETURN(m.shape, ParseShape(*shape, "shape"));
  CAIRN_ASSIGN_OR_RETURN(const Json* dtype_json, GetField(j, "dtype"));
  if (!dtype_json->is_string()) {
    return InvalidArgumentError("dtype: only simple dtypes are supported, got " +
                                DumpJson(*dtype_json));
  }
  auto dtype = ParseZarr2DType(dtype_json->get<std::string>());
  if (!dtype.ok()) return dtype.status().Annotate("dtype");
  m.dtype = dtype->dtype;
  m.v2_big_endian = dtype->big_endian && DTypeSize(m.dtype) > 1;
  CAIRN_ASSIGN_OR_RETURN(const Json* chunks, GetField(j, "chunks"));
  CAIRN_ASSIGN_OR_RETURN(m.chunk_shape, JsonToIntVector(*chunks, "chunks"));
  CAIRN_RETURN_IF_ERROR(ValidateChunkShape(m.chunk_shape, m.shape, m.dtype, "chunks"));

  const Json* fill = FindField(j, "fill_value");
  CAIRN_ASSIGN_OR_RETURN(auto fill_value, ParseFillValueV2(fill ? *fill : Json(nullptr), m.dtype));
  m.fill_value_is_null = !fill_value.has_value();
  m.fill_value = fill_value ? *std::move(fill_value) : std::vector<uint8_t>(DTypeSize(m.dtype), 0);

  if (const Json* order = FindField(j, "order")) {
    CAIRN_ASSIGN_OR_RETURN(std::string o, JsonToString(*order, "order"));
    if (o != "C" && o != "F") {
      return InvalidArgumentError("order: expected \"C\" or \"F\", got \"" + o + "\"");
    }
    m.v2_fortran_order = o == "F";
  }
  if (const Json* filters = FindField(j, "filters")) {
    if (!filters->is_null() && !(filters->is_array() && filters->empty())) {
      return InvalidArgumentError("filters: not supported, got " + DumpJson(*filters));
    }
  }
  m.chunk_key_encoding = {ChunkKeyEncoding::Kind::kV2, '.'};
  if (const Json* sep = FindField(j, "dimension_separator")) {
    CAIRN_ASSIGN_OR_RETURN(std::string s, JsonToString(*sep, "dimension_separator"));
    if (s != "." && s != "/") {
      return InvalidArgumentError("dimension_separator: expected \".\" or \"/\", got \"" + s +
                                  "\"");
    }
    m.chunk_key_encoding.separator = s[0];
  }

  // The equivalent v3 chain: [transpose (F order)], bytes, [compressor].
  std::vector<std::shared_ptr<const ArrayCodec>> array_codecs;
  if (m.v2_fortran_order && m.shape.size() > 1) {
    std::vector<int64_t> order;
    for (size_t i = m.shape.size(); i-- > 0;) order.push_back(static_cast<int64_t>(i));
    array_codecs.push_back(std::make_shared<TransposeCodec>(std::move(order)));
  }
  std::optional<Endian> endian;
  if (DTypeSize(m.dtype) > 1) endian = m.v2_big_endian ? Endian::kBig : Endian::kLittle;
  auto bytes = std::make_shared<BytesArrayCodec>(endian);
  std::vector<std::shared_ptr<const BytesCodec>> bytes_codecs;
  m.v2_compressor = nullptr;
  if (const Json* compressor = FindField(j, "compressor"); compressor && !compressor->is_null()) {
    auto c = ParseZarr2Compressor(*compressor, m.dtype);
    if (!c.ok()) return c.status().Annotate("compressor");
    if (c->codec != nullptr) bytes_codecs.push_back(c->codec);
    m.v2_compressor = c->json;
  }
  m.codecs = CodecChain(std::move(array_codecs), std::move(bytes), std::move(bytes_codecs));

  static constexpr std::string_view kKnown[] = {
      "zarr_format", "shape",   "chunks",  "dtype",
      "fill_value",  "order",   "filters", "compressor", "dimension_separator"};
  for (const auto& [key, value] : j.items()) {
    if (std::find(std::begin(kKnown), std::end(kKnown), key) != std::end(kKnown)) continue;
    if (!allow_extra_members) return InvalidArgumentError("unsupported member \"" + key + "\"");
    m.extra_members[key] = value;
  }
  return m;
}

Json V2ToJson(const ArrayMetadata& m) {
  Json j = m.extra_members.is_object() ? m.extra_members : Json::object();
  j["chunks"] = m.chunk_shape;
  j["compressor"] = m.v2_compressor;
  j["dimension_separator"] = std::string(1, m.chunk_key_encoding.separator);
  j["dtype"] = FormatZarr2DType(m.dtype, m.v2_big_endian);
  j["fill_value"] = m.fill_value_is_null ? Json(nullptr) : FillValueToJsonV2(m.dtype, m.fill_value);
  j["filters"] = nullptr;
  j["order"] = m.v2_fortran_order ? "F" : "C";
  j["shape"] = m.shape;
  j["zarr_format"] = 2;
  return j;
}

Result<Json> CompleteV2(const Json& partial) {
  Json j = partial;
  if (!j.contains("zarr_format")) j["zarr_format"] = 2;
  CAIRN_ASSIGN_OR_RETURN(const Json* shape_json, GetField(j, "shape"));
  CAIRN_ASSIGN_OR_RETURN(Shape shape, ParseShape(*shape_json, "shape"));
  CAIRN_RETURN_IF_ERROR(GetField(j, "dtype").status());
  if (!j.contains("chunks")) j["chunks"] = DefaultChunkShape(shape);
  if (!j.contains("compressor")) j["compressor"] = {{"id", "blosc"}};
  if (!j.contains("fill_value")) j["fill_value"] = nullptr;
  if (!j.contains("order")) j["order"] = "C";
  if (!j.contains("filters")) j["filters"] = nullptr;
  if (!j.contains("dimension_separator")) j["dimension_separator"] = ".";
  return j;
}

}  // namespace cairn::internal_zarr
