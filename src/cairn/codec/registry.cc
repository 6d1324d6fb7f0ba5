#include "cairn/codec/registry.h"

#include "cairn/codec/blosc_codec.h"
#include "cairn/codec/bytes_codec.h"
#include "cairn/codec/crc32c_codec.h"
#include "cairn/codec/gzip_codec.h"
#include "cairn/codec/sharding_codec.h"
#include "cairn/codec/transpose_codec.h"
#include "cairn/codec/zstd_codec.h"

namespace cairn {
namespace {

template <typename T>
Result<ParsedCodec> AsArray(Result<std::shared_ptr<const T>> r) {
  if (!r.ok()) return r.status();
  ParsedCodec p;
  p.kind = CodecKind::kArrayToArray;
  p.array = std::move(r).value();
  return p;
}

template <typename T>
Result<ParsedCodec> AsArrayToBytes(Result<std::shared_ptr<const T>> r) {
  if (!r.ok()) return r.status();
  ParsedCodec p;
  p.kind = CodecKind::kArrayToBytes;
  p.array_to_bytes = std::move(r).value();
  return p;
}

template <typename T>
Result<ParsedCodec> AsBytes(Result<std::shared_ptr<const T>> r) {
  if (!r.ok()) return r.status();
  ParsedCodec p;
  p.kind = CodecKind::kBytesToBytes;
  p.bytes = std::move(r).value();
  return p;
}

Result<ParsedCodec> ParseTranspose(const Json* c, const ChunkSpec& s) {
  return AsArray(TransposeCodec::FromJson(c, s));
}
Result<ParsedCodec> ParseBytes(const Json* c, const ChunkSpec& s) {
  return AsArrayToBytes(BytesArrayCodec::FromJson(c, s));
}
Result<ParsedCodec> ParseSharding(const Json* c, const ChunkSpec& s) {
  return AsArrayToBytes(ShardingCodec::FromJson(c, s));
}
Result<ParsedCodec> ParseZstd(const Json* c, const ChunkSpec&) {
  return AsBytes(ZstdCodec::FromJson(c));
}
Result<ParsedCodec> ParseGzip(const Json* c, const ChunkSpec&) {
  return AsBytes(DeflateCodec::GzipFromJson(c));
}
Result<ParsedCodec> ParseBlosc(const Json* c, const ChunkSpec& s) {
  return AsBytes(BloscCodec::FromJson(c, s));
}
Result<ParsedCodec> ParseCrc32c(const Json* c, const ChunkSpec&) {
  return AsBytes(Crc32cCodec::FromJson(c));
}

constexpr CodecRegistration kCodecs[] = {
    {"transpose", CodecKind::kArrayToArray, &ParseTranspose},
    {"bytes", CodecKind::kArrayToBytes, &ParseBytes},
    {"sharding_indexed", CodecKind::kArrayToBytes, &ParseSharding},
    {"zstd", CodecKind::kBytesToBytes, &ParseZstd},
    {"gzip", CodecKind::kBytesToBytes, &ParseGzip},
    {"blosc", CodecKind::kBytesToBytes, &ParseBlosc},
    {"crc32c", CodecKind::kBytesToBytes, &ParseCrc32c},
};

}  // namespace

std::span<const CodecRegistration> RegisteredCodecs() { return kCodecs; }

const CodecRegistration* FindCodec(std::string_view name) {
  for (const CodecRegistration& r : kCodecs) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

}  // namespace cairn
