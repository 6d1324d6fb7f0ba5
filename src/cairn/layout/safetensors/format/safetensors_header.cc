#include "cairn/layout/safetensors/format/safetensors_header.h"

#include <algorithm>
#include <set>
#include <utility>

#include "cairn/util/json.h"

namespace cairn::safetensors {
namespace {

constexpr std::string_view kMetadataKey = "__metadata__";

struct NamedDType {
  DType dtype;
  std::string_view name;
};

// In the safetensors package's dtype order (its writer sorts by it, widest
// last here, and writes the widest first).
constexpr NamedDType kDTypes[] = {
    {DType::kBool, "BOOL"},
    {DType::kUInt8, "U8"},
    {DType::kInt8, "I8"},
    {DType::kFloat8E5M2, "F8_E5M2"},
    {DType::kFloat8E4M3FN, "F8_E4M3"},
    {DType::kFloat8E8M0FNU, "F8_E8M0"},
    {DType::kFloat8E4M3FNUZ, "F8_E4M3FNUZ"},
    {DType::kFloat8E5M2FNUZ, "F8_E5M2FNUZ"},
    {DType::kInt16, "I16"},
    {DType::kUInt16, "U16"},
    {DType::kFloat16, "F16"},
    {DType::kBFloat16, "BF16"},
    {DType::kInt32, "I32"},
    {DType::kUInt32, "U32"},
    {DType::kFloat32, "F32"},
    {DType::kComplex64, "C64"},
    {DType::kFloat64, "F64"},
    {DType::kInt64, "I64"},
    {DType::kUInt64, "U64"},
};

int DTypeRank(DType dtype) {
  for (size_t i = 0; i < std::size(kDTypes); ++i) {
    if (kDTypes[i].dtype == dtype) return static_cast<int>(i);
  }
  return -1;
}

uint64_t ReadLE64(ByteView b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | b[i];
  return v;
}

// Elements x element size, or nullopt on overflow or a negative dimension.
std::optional<uint64_t> ByteSize(const std::vector<int64_t>& shape, DType dtype) {
  unsigned __int128 n = DTypeSize(dtype);
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    n *= static_cast<uint64_t>(d);
    if (n > UINT64_MAX) return std::nullopt;
  }
  return static_cast<uint64_t>(n);
}

Status Corrupt(std::string_view what, std::string_view detail) {
  return Status(StatusCode::kDataLoss,
                "safetensors header of " + std::string(what) + ": " + std::string(detail));
}

Result<TensorEntry> ParseEntry(const std::string& name, const Json& j, std::string_view what) {
  const std::string where = "tensor `" + name + "`";
  if (!j.is_object()) return Corrupt(what, where + " is not an object");
  TensorEntry e;
  e.name = name;
  auto dtype_name = GetStringField(j, "dtype");
  if (!dtype_name.ok()) return Corrupt(what, where + ": " + std::string(dtype_name.status().message()));
  auto dtype = DTypeFromSafetensors(*dtype_name);
  if (!dtype.ok()) return Corrupt(what, where + ": " + std::string(dtype.status().message()));
  e.dtype = *dtype;
  auto shape_field = GetField(j, "shape");
  if (!shape_field.ok()) return Corrupt(what, where + ": no `shape`");
  auto shape = JsonToIntVector(**shape_field, "shape");
  if (!shape.ok()) return Corrupt(what, where + ": " + std::string(shape.status().message()));
  e.shape = std::move(*shape);
  auto offsets_field = GetField(j, "data_offsets");
  if (!offsets_field.ok() || !(*offsets_field)->is_array() || (*offsets_field)->size() != 2) {
    return Corrupt(what, where + ": `data_offsets` must be [begin, end]");
  }
  auto begin = JsonToUInt((**offsets_field)[0], "data_offsets[0]");
  auto end = JsonToUInt((**offsets_field)[1], "data_offsets[1]");
  if (!begin.ok() || !end.ok()) {
    return Corrupt(what, where + ": `data_offsets` must be non-negative integers");
  }
  if (*end < *begin) return Corrupt(what, where + ": data_offsets end before begin");
  e.begin = *begin;
  e.end = *end;
  std::optional<uint64_t> expected = ByteSize(e.shape, e.dtype);
  if (!expected) return Corrupt(what, where + ": shape is negative or its size overflows");
  if (*expected != e.num_bytes()) {
    return Corrupt(what, where + ": shape and dtype make " + std::to_string(*expected) +
                             " bytes but data_offsets span " + std::to_string(e.num_bytes()));
  }
  return e;
}

}  // namespace

Result<std::string_view> DTypeToSafetensors(DType dtype) {
  int rank = DTypeRank(dtype);
  if (rank < 0) {
    return Status(StatusCode::kInvalidArgument,
                  "safetensors has no dtype for " + std::string(DTypeName(dtype)));
  }
  return kDTypes[rank].name;
}

Result<DType> DTypeFromSafetensors(std::string_view name) {
  for (const NamedDType& d : kDTypes) {
    if (d.name == name) return d.dtype;
  }
  return Status(StatusCode::kInvalidArgument,
                "unsupported safetensors dtype `" + std::string(name) + "`");
}

Result<uint64_t> ParseHeaderLength(ByteView first_8_bytes, uint64_t file_size,
                                   std::string_view what) {
  if (first_8_bytes.size() < kLengthPrefixBytes || file_size < kLengthPrefixBytes) {
    return Corrupt(what, "file is shorter than the 8-byte header length");
  }
  uint64_t n = ReadLE64(first_8_bytes);
  if (n > kMaxHeaderBytes) {
    return Corrupt(what, "header length " + std::to_string(n) + " exceeds the limit of " +
                             std::to_string(kMaxHeaderBytes) + " bytes");
  }
  if (n > file_size - kLengthPrefixBytes) {
    return Corrupt(what, "header length " + std::to_string(n) + " runs past the end of the " +
                             std::to_string(file_size) + "-byte file");
  }
  return n;
}

Result<Header> ParseHeader(std::string_view header_json, uint64_t file_size,
                           std::string_view what) {
  const uint64_t n = header_json.size();
  if (n > kMaxHeaderBytes || file_size < kLengthPrefixBytes + n) {
    return Corrupt(what, "header does not fit in the file");
  }
  auto parsed = ParseJson(header_json, "safetensors header");
  if (!parsed.ok()) return Corrupt(what, parsed.status().message());
  const Json& root = *parsed;
  if (!root.is_object()) return Corrupt(what, "header is not a JSON object");
  Header header;
  header.data_start = kLengthPrefixBytes + n;
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() == kMetadataKey) {
      if (!it->is_object()) return Corrupt(what, "`__metadata__` is not an object");
      for (auto m = it->begin(); m != it->end(); ++m) {
        if (!m->is_string()) {
          return Corrupt(what, "`__metadata__` value of `" + m.key() + "` is not a string");
        }
        header.metadata[m.key()] = m->get<std::string>();
      }
      continue;
    }
    auto entry = ParseEntry(it.key(), *it, what);
    if (!entry.ok()) return entry.status();
    header.tensors.push_back(std::move(*entry));
  }
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const TensorEntry& a, const TensorEntry& b) {
              return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
            });
  // The tensors tile the data buffer: each starts where the previous ended.
  const uint64_t data_size = file_size - header.data_start;
  uint64_t cursor = 0;
  for (const TensorEntry& e : header.tensors) {
    if (e.begin != cursor) {
      return Corrupt(what, "tensor `" + e.name + "` starts at " + std::to_string(e.begin) +
                               (e.begin < cursor ? " and overlaps the tensor before it"
                                                 : " and leaves a hole before it") +
                               " (expected " + std::to_string(cursor) + ")");
    }
    cursor = e.end;
  }
  if (cursor != data_size) {
    return Corrupt(what, "tensors cover " + std::to_string(cursor) +
                             " bytes but the data buffer holds " + std::to_string(data_size));
  }
  return header;
}

Result<BuiltHeader> BuildHeader(std::vector<TensorSpec> tensors,
                                const std::map<std::string, std::string>& metadata) {
  std::set<std::string_view> names;
  for (const TensorSpec& t : tensors) {
    if (t.name == kMetadataKey) {
      return Status(StatusCode::kInvalidArgument, "tensor name `__metadata__` is reserved");
    }
    if (!names.insert(t.name).second) {
      return Status(StatusCode::kInvalidArgument, "duplicate tensor name `" + t.name + "`");
    }
    if (DTypeRank(t.dtype) < 0) {
      return Status(StatusCode::kInvalidArgument,
                    "tensor `" + t.name + "`: safetensors has no dtype for " +
                        std::string(DTypeName(t.dtype)));
    }
  }
  std::stable_sort(tensors.begin(), tensors.end(), [](const TensorSpec& a, const TensorSpec& b) {
    int ra = DTypeRank(a.dtype), rb = DTypeRank(b.dtype);
    return ra != rb ? ra > rb : a.name < b.name;
  });
  BuiltHeader out;
  std::string json = "{";
  if (!metadata.empty()) {
    json += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) json += ",";
      first = false;
      json += Json(k).dump() + ":" + Json(v).dump();
    }
    json += "}";
  }
  uint64_t offset = 0;
  for (TensorSpec& t : tensors) {
    std::optional<uint64_t> bytes = ByteSize(t.shape, t.dtype);
    if (!bytes || offset + *bytes < offset) {
      return Status(StatusCode::kInvalidArgument,
                    "tensor `" + t.name + "`: negative dimension or size overflow");
    }
    if (json.size() > 1) json += ",";
    json += Json(t.name).dump() + ":{\"dtype\":\"" + std::string(*DTypeToSafetensors(t.dtype)) +
            "\",\"shape\":[";
    for (size_t i = 0; i < t.shape.size(); ++i) {
      if (i) json += ",";
      json += std::to_string(t.shape[i]);
    }
    json += "],\"data_offsets\":[" + std::to_string(offset) + "," +
            std::to_string(offset + *bytes) + "]}";
    out.header.tensors.push_back({std::move(t.name), t.dtype, std::move(t.shape), offset,
                                  offset + *bytes});
    offset += *bytes;
  }
  json += "}";
  json.append((8 - json.size() % 8) % 8, ' ');
  if (json.size() > kMaxHeaderBytes) {
    return Status(StatusCode::kInvalidArgument, "safetensors header would exceed " +
                                                    std::to_string(kMaxHeaderBytes) + " bytes");
  }
  out.header.metadata = metadata;
  out.header.data_start = kLengthPrefixBytes + json.size();
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out.bytes.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out.bytes += json;
  return out;
}

}  // namespace cairn::safetensors
