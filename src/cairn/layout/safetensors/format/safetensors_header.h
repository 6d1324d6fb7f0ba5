// The safetensors file header, as the `safetensors` package (Hugging Face)
// writes and reads it. Pure: parses and builds bytes, no I/O.
//
// A file is
//   u64 little-endian N | N bytes of JSON header | data buffer
// The header is one JSON object: an optional "__metadata__" member mapping
// strings to strings, and one member per tensor:
//   {"dtype": "BF16", "shape": [4096, 1024], "data_offsets": [begin, end]}
// with offsets relative to the start of the data buffer. Tensors are stored
// row-major, little-endian, without padding between them, and together they
// cover the data buffer exactly (no holes, no overlaps). The writer pads the
// JSON with spaces to a multiple of 8 bytes and orders tensors by dtype
// (widest first, in the package's dtype order) and then by name, which
// BuildHeader reproduces byte for byte. docs/formats/safetensors.md says what
// cairn implements and why.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/dtype/dtype.h"
#include "cairn/util/buffer.h"
#include "cairn/result.h"

namespace cairn::safetensors {

// Bytes of the length prefix.
inline constexpr uint64_t kLengthPrefixBytes = 8;
// The largest header the safetensors package accepts (it refuses more).
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct TensorEntry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // offsets in the data buffer
  uint64_t end = 0;
  uint64_t num_bytes() const { return end - begin; }
};

struct Header {
  // Sorted by `begin` (the order of the bytes in the file).
  std::vector<TensorEntry> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__"
  // Where the data buffer starts in the file: 8 + N.
  uint64_t data_start = 0;
};

// The safetensors dtype name ("BF16", "F8_E4M3") of `dtype`, or
// InvalidArgument for types safetensors has no name for.
Result<std::string_view> DTypeToSafetensors(DType dtype);
// The dtype for a safetensors name; InvalidArgument names an unknown one
// (F4/F6 packed types are not supported: they are not one element a byte).
Result<DType> DTypeFromSafetensors(std::string_view name);

// Reads N from the first 8 bytes and checks it against the file's size and
// kMaxHeaderBytes. `what` names the file in errors.
Result<uint64_t> ParseHeaderLength(ByteView first_8_bytes, uint64_t file_size,
                                   std::string_view what);

// Parses and validates the N header bytes of a file of `file_size` bytes:
// the JSON shape, dtypes, shapes (product x element size == end - begin,
// without overflow), offsets that tile the data buffer exactly, metadata
// values that are strings. DataLoss names the tensor and the file.
Result<Header> ParseHeader(std::string_view header_json, uint64_t file_size,
                           std::string_view what);

// What a writer knows before writing: names, dtypes, shapes.
struct TensorSpec {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
};

// Lays out `tensors` as the safetensors package does and returns the file's
// first bytes (length prefix + padded JSON) and the entries with their
// offsets, in file order. InvalidArgument for duplicate or reserved names,
// negative dimensions or unsupported dtypes.
struct BuiltHeader {
  std::string bytes;
  Header header;
};
Result<BuiltHeader> BuildHeader(std::vector<TensorSpec> tensors,
                                const std::map<std::string, std::string>& metadata);

}  // namespace cairn::safetensors
