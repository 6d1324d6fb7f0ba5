// Shared metadata pieces and the zarr v3 `zarr.json` document.
#include "cairn/zarr/metadata.h"

#include <algorithm>
#include <string>

#include "cairn/codec/sharding_codec.h"
#include "cairn/zarr/codec_defaults.h"
#include "cairn/zarr/fill_value.h"
#include "cairn/zarr/metadata_internal.h"

namespace cairn {

std::string ChunkKeyEncoding::FormatKey(std::span<const Index> cell) const {
  std::string key = kind == Kind::kDefault ? "c" : "";
  if (cell.empty()) return kind == Kind::kDefault ? "c" : "0";
  for (size_t i = 0; i < cell.size(); ++i) {
    if (kind == Kind::kDefault || i > 0) key += separator;
    key += std::to_string(cell[i]);
  }
  return key;
}

Shape DefaultChunkShape(std::span<const Index> shape) {
  constexpr Index kTarget = Index{1} << 20;
  auto elements = [&](Index x) {
    Index n = 1;
    for (Index d : shape) {
      n *= std::min(std::max<Index>(d, 1), x);
      if (n > kTarget) return kTarget + 1;
    }
    return n;
  };
  Index lo = 1, hi = kTarget;  // elements(lo) <= kTarget always
  while (lo < hi) {
    const Index mid = lo + (hi - lo + 1) / 2;
    if (elements(mid) <= kTarget) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  Shape chunk;
  for (Index d : shape) chunk.push_back(std::min(std::max<Index>(d, 1), lo));
  return chunk;
}

namespace internal_zarr {

Result<Shape> ParseShape(const Json& j, std::string_view what) {
  CAIRN_ASSIGN_OR_RETURN(Shape shape, JsonToIntVector(j, what));
  if (shape.size() > kMaxRank) {
    return InvalidArgumentError(std::string(what) + ": rank " + std::to_string(shape.size()) +
                                " exceeds the maximum of " + std::to_string(kMaxRank));
  }
  for (Index d : shape) {
    if (d < 0 || d > kMaxDimension) {
      return InvalidArgumentError(std::string(what) + ": dimension " + std::to_string(d) +
                                  " is outside [0, 2^62]");
    }
  }
  if (!CheckedNumElements(shape)) {
    return InvalidArgumentError(std::string(what) + ": " + DumpJson(j) +
                                " has more elements than fit in 64 bits");
  }
  return shape;
}

Status ValidateChunkShape(const Shape& chunk, const Shape& shape, DType dtype,
                          std::string_view what) {
  if (chunk.size() != shape.size()) {
    return InvalidArgumentError(std::string(what) + ": rank " + std::to_string(chunk.size()) +
                                " does not match the rank " + std::to_string(shape.size()) +
                                " of the shape");
  }
  for (Index d : chunk) {
    if (d < 1) {
      return InvalidArgumentError(std::string(what) + ": chunk dimension " + std::to_string(d) +
                                  " is not positive");
    }
  }
  std::optional<Index> n = CheckedNumElements(chunk);
  const Index elem = static_cast<Index>(DTypeSize(dtype));
  if (!n || *n > kMaxChunkBytes / elem) {
    return InvalidArgumentError(std::string(what) + ": a chunk of this shape exceeds " +
                                std::to_string(kMaxChunkBytes) + " bytes");
  }
  return Status::OK();
}

Json ChunkKeyEncodingToJson(const ChunkKeyEncoding& e) {
  const bool is_default = e.kind == ChunkKeyEncoding::Kind::kDefault;
  Json j = {{"name", is_default ? "default" : "v2"}};
  const char default_sep = is_default ? '/' : '.';
  if (e.separator != default_sep) {
    j["configuration"] = {{"separator", std::string(1, e.separator)}};
  }
  return j;
}

}  // namespace internal_zarr

using namespace internal_zarr;  // NOLINT within this file

namespace {

Result<ChunkKeyEncoding> ParseChunkKeyEncoding(const Json& j) {
  constexpr std::string_view kWhat = "chunk_key_encoding";
  if (!j.is_object()) {
    return InvalidArgumentError("chunk_key_encoding: expected an object, got " + DumpJson(j));
  }
  CAIRN_RETURN_IF_ERROR(CheckOnlyMembers(j, {"name", "configuration"}, kWhat));
  CAIRN_ASSIGN_OR_RETURN(std::string name, GetStringField(j, "name"));
  ChunkKeyEncoding e;
  if (name == "default") {
    e = {ChunkKeyEncoding::Kind::kDefault, '/'};
  } else if (name == "v2") {
    e = {ChunkKeyEncoding::Kind::kV2, '.'};
  } else {
    return InvalidArgumentError("chunk_key_encoding: unknown name \"" + name + "\"");
  }
  if (const Json* config = FindField(j, "configuration")) {
    if (!config->is_object()) {
      return InvalidArgumentError("chunk_key_encoding: configuration must be an object");
    }
    CAIRN_RETURN_IF_ERROR(CheckOnlyMembers(*config, {"separator"}, kWhat));
    if (const Json* sep = FindField(*config, "separator")) {
      CAIRN_ASSIGN_OR_RETURN(std::string s, JsonToString(*sep, "chunk_key_encoding.separator"));
      if (s != "/" && s != ".") {
        return InvalidArgumentError("chunk_key_encoding: separator must be \"/\" or \".\", got \"" +
                                    s + "\"");
      }
      e.separator = s[0];
    }
  }
  return e;
}

Result<Shape> ParseChunkGrid(const Json& j, const Shape& shape, DType dtype) {
  if (!j.is_object()) return InvalidArgumentError("chunk_grid: expected an object");
  CAIRN_RETURN_IF_ERROR(CheckOnlyMembers(j, {"name", "configuration"}, "chunk_grid"));
  CAIRN_ASSIGN_OR_RETURN(std::string name, GetStringField(j, "name"));
  if (name != "regular") {
    return InvalidArgumentError("chunk_grid: only \"regular\" is supported, got \"" + name + "\"");
  }
  CAIRN_ASSIGN_OR_RETURN(const Json* config, GetField(j, "configuration"));
  if (!config->is_object()) {
    return InvalidArgumentError("chunk_grid: configuration must be an object");
  }
  CAIRN_RETURN_IF_ERROR(CheckOnlyMembers(*config, {"chunk_shape"}, "chunk_grid.configuration"));
  CAIRN_ASSIGN_OR_RETURN(const Json* cs, GetField(*config, "chunk_shape"));
  CAIRN_ASSIGN_OR_RETURN(Shape chunk, JsonToIntVector(*cs, "chunk_grid.chunk_shape"));
  CAIRN_RETURN_IF_ERROR(ValidateChunkShape(chunk, shape, dtype, "chunk_grid.chunk_shape"));
  return chunk;
}

Result<std::vector<std::optional<std::string>>> ParseDimensionNames(const Json& j, size_t rank) {
  if (!j.is_array() || j.size() != rank) {
    return InvalidArgumentError("dimension_names: expected a list of " + std::to_string(rank) +
                                " strings or nulls, got " + DumpJson(j));
  }
  std::vector<std::optional<std::string>> names;
  for (const Json& n : j) {
    if (n.is_null()) {
      names.emplace_back();
    } else if (n.is_string()) {
      names.emplace_back(n.get<std::string>());
    } else {
      return InvalidArgumentError("dimension_names: expected a string or null, got " +
                                  DumpJson(n));
    }
  }
  return names;
}

Result<ArrayMetadata> ParseV3(const Json& j) {
  ArrayMetadata m;
  m.format = ZarrFormat::kV3;
  CAIRN_ASSIGN_OR_RETURN(int64_t zarr_format, GetIntField(j, "zarr_format"));
  if (zarr_format != 3) {
    return InvalidArgumentError("zarr_format: expected 3, got " + std::to_string(zarr_format));
  }
  CAIRN_ASSIGN_OR_RETURN(std::string node_type, GetStringField(j, "node_type"));
  if (node_type != "array") {
    return InvalidArgumentError("node_type: expected \"array\", got \"" + node_type + "\"");
  }
  CAIRN_ASSIGN_OR_RETURN(const Json* shape, GetField(j, "shape"));
  CAIRN_ASSIGN_OR_RETURN(m.shape, ParseShape(*shape, "shape"));
  CAIRN_ASSIGN_OR_RETURN(const Json* data_type, GetField(j, "data_type"));
  if (!data_type->is_string()) {
    return InvalidArgumentError("data_type: expected a type name, got " + DumpJson(*data_type));
  }
  auto dtype = ParseDTypeName(data_type->get<std::string>());
  if (!dtype.ok()) return dtype.status().Annotate("data_type");
  m.dtype = *dtype;
  CAIRN_ASSIGN_OR_RETURN(const Json* grid, GetField(j, "chunk_grid"));
  CAIRN_ASSIGN_OR_RETURN(m.chunk_shape, ParseChunkGrid(*grid, m.shape, m.dtype));
  CAIRN_ASSIGN_OR_RETURN(const Json* cke, GetField(j, "chunk_key_encoding"));
  CAIRN_ASSIGN_OR_RETURN(m.chunk_key_encoding, ParseChunkKeyEncoding(*cke));
  CAIRN_ASSIGN_OR_RETURN(const Json* fill, GetField(j, "fill_value"));
  CAIRN_ASSIGN_OR_RETURN(m.fill_value, ParseFillValueV3(*fill, m.dtype));
  CAIRN_ASSIGN_OR_RETURN(const Json* codecs, GetField(j, "codecs"));
  if (!codecs->is_array()) return InvalidArgumentError("codecs: expected a list");
  auto chain = CodecChain::FromJson(*codecs, m.chunk_spec());
  if (!chain.ok()) return chain.status().Annotate("codecs");
  m.codecs = *std::move(chain);
  if (const Json* names = FindField(j, "dimension_names")) {
    if (!names->is_null()) {
      CAIRN_ASSIGN_OR_RETURN(m.dimension_names, ParseDimensionNames(*names, m.shape.size()));
    }
  }
  if (const Json* attrs = FindField(j, "attributes")) {
    if (!attrs->is_object()) return InvalidArgumentError("attributes: expected an object");
    m.attributes = *attrs;
  }
  if (const Json* st = FindField(j, "storage_transformers")) {
    if (!st->is_array() || !st->empty()) {
      return InvalidArgumentError("storage_transformers: only an empty list is supported");
    }
  }
  static constexpr std::string_view kKnown[] = {
      "zarr_format", "node_type",       "shape",      "data_type",            "chunk_grid",
      "chunk_key_encoding", "fill_value", "codecs",   "dimension_names",      "attributes",
      "storage_transformers"};
  for (const auto& [key, value] : j.items()) {
    if (std::find(std::begin(kKnown), std::end(kKnown), key) != std::end(kKnown)) continue;
    const Json* mu = FindField(value, "must_understand");
    if (mu == nullptr || !mu->is_boolean() || mu->get<bool>()) {
      return InvalidArgumentError("unsupported member \"" + key +
                                  "\" is not marked {\"must_understand\": false}");
    }
    m.extra_members[key] = value;
  }
  return m;
}

Json V3ToJson(const ArrayMetadata& m) {
  Json j = m.extra_members.is_object() ? m.extra_members : Json::object();
  if (m.attributes.is_object() && !m.attributes.empty()) j["attributes"] = m.attributes;
  j["chunk_grid"] = {{"configuration", {{"chunk_shape", m.chunk_shape}}}, {"name", "regular"}};
  j["chunk_key_encoding"] = ChunkKeyEncodingToJson(m.chunk_key_encoding);
  j["codecs"] = m.codecs.ToJson();
  j["data_type"] = std::string(DTypeName(m.dtype));
  const bool any_name = std::any_of(m.dimension_names.begin(), m.dimension_names.end(),
                                    [](const auto& n) { return n.has_value(); });
  if (any_name) {
    Json names = Json::array();
    for (const auto& n : m.dimension_names) names.push_back(n ? Json(*n) : Json(nullptr));
    j["dimension_names"] = std::move(names);
  }
  j["fill_value"] = FillValueToJsonV3(m.dtype, m.fill_value);
  j["node_type"] = "array";
  j["shape"] = m.shape;
  j["zarr_format"] = 3;
  return j;
}

// Fills TensorStore's defaults into a partial v3 document.
Result<Json> CompleteV3(const Json& partial) {
  Json j = partial;
  if (!j.contains("zarr_format")) j["zarr_format"] = 3;
  if (!j.contains("node_type")) j["node_type"] = "array";
  CAIRN_ASSIGN_OR_RETURN(const Json* shape_json, GetField(j, "shape"));
  CAIRN_ASSIGN_OR_RETURN(Shape shape, ParseShape(*shape_json, "shape"));
  CAIRN_ASSIGN_OR_RETURN(std::string type_name, GetStringField(j, "data_type"));
  auto dtype = ParseDTypeName(type_name);
  if (!dtype.ok()) return dtype.status().Annotate("data_type");
  if (!j.contains("chunk_grid")) {
    j["chunk_grid"] = {{"name", "regular"},
                       {"configuration", {{"chunk_shape", DefaultChunkShape(shape)}}}};
  }
  if (!j.contains("chunk_key_encoding")) j["chunk_key_encoding"] = {{"name", "default"}};
  if (!j.contains("fill_value")) j["fill_value"] = FillValueToJsonV3(*dtype, ZeroElement(*dtype));
  const Json codecs = j.contains("codecs") ? j["codecs"] : Json::array();
  auto completed = CompleteCodecsJson(codecs, *dtype, shape.size());
  if (!completed.ok()) return completed.status();
  j["codecs"] = *std::move(completed);
  return j;
}

}  // namespace

Shape ReadChunkShape(const ArrayMetadata& metadata) {
  Shape shape = metadata.chunk_shape;
  const CodecChain* chain = &metadata.codecs;
  // Only a sharding codec directly on the chunk grid keeps the grid's axes.
  while (chain->array_codecs().empty()) {
    const auto* sharding = dynamic_cast<const ShardingCodec*>(chain->array_to_bytes().get());
    if (sharding == nullptr) break;
    shape = sharding->chunk_shape();
    chain = &sharding->inner_codecs();
  }
  return shape;
}

Result<ArrayMetadata> ParseArrayMetadata(ZarrFormat format, const Json& json) {
  if (!json.is_object()) {
    return InvalidArgumentError("array metadata must be a JSON object, got " + DumpJson(json));
  }
  return format == ZarrFormat::kV3 ? ParseV3(json) : ParseV2(json);
}

Json ArrayMetadata::ToJson() const {
  return format == ZarrFormat::kV3 ? V3ToJson(*this) : V2ToJson(*this);
}

Result<ArrayMetadata> MetadataFromPartial(ZarrFormat format, const Json& partial) {
  if (!partial.is_object()) {
    return InvalidArgumentError("array metadata must be a JSON object, got " + DumpJson(partial));
  }
  if (format == ZarrFormat::kV2) {
    CAIRN_ASSIGN_OR_RETURN(Json full, CompleteV2(partial));
    return ParseV2(full, /*allow_extra_members=*/false);
  }
  CAIRN_ASSIGN_OR_RETURN(Json full, CompleteV3(partial));
  return ParseV3(full);
}

}  // namespace cairn
