// The table of zarr v3 codecs cairn understands: name -> kind and parser.
// One explicit list (registry.cc); no self-registering globals.
//
// Thread safety: the table is constant.
#pragma once

#include <memory>
#include <span>
#include <string_view>

#include "cairn/codec/codec.h"

namespace cairn {

enum class CodecKind : uint8_t { kArrayToArray, kArrayToBytes, kBytesToBytes };

// A parsed codec: exactly the member matching `kind` is set.
struct ParsedCodec {
  CodecKind kind = CodecKind::kBytesToBytes;
  std::shared_ptr<const ArrayCodec> array;
  std::shared_ptr<const ArrayToBytesCodec> array_to_bytes;
  std::shared_ptr<const BytesCodec> bytes;
};

// Parses a codec's `configuration` (nullptr when absent). `spec` describes
// the data the codec receives when encoding (for bytes->bytes codecs: the
// chunk as seen by the array->bytes codec).
using CodecParser = Result<ParsedCodec> (*)(const Json* configuration, const ChunkSpec& spec);

struct CodecRegistration {
  std::string_view name;
  CodecKind kind;
  CodecParser parse;
};

// All codecs: transpose, bytes, sharding_indexed, zstd, gzip, blosc, crc32c.
std::span<const CodecRegistration> RegisteredCodecs();

// The registration named `name`, or nullptr.
const CodecRegistration* FindCodec(std::string_view name);

}  // namespace cairn
