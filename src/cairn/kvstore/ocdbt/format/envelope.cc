#include "cairn/kvstore/ocdbt/format/envelope.h"

#include <algorithm>

#include <zstd.h>

#include <cstdio>
#include <memory>
#include <string>

#include "cairn/kvstore/ocdbt/format/field_reader.h"
#include "cairn/util/coding.h"
#include "cairn/util/crc32c.h"

namespace cairn::ocdbt {
namespace {

constexpr size_t kHeaderFixedBytes = 12;  // magic + length
constexpr size_t kMinEnvelopeBytes = 16;

struct DctxFree {
  void operator()(ZSTD_DCtx* d) const { ZSTD_freeDCtx(d); }
};

Result<Buffer> ZstdDecompressOneFrame(ByteView src, const FieldReader& at, uint64_t max_body) {
  size_t frame_size = ZSTD_findFrameCompressedSize(src.data(), src.size());
  if (ZSTD_isError(frame_size)) {
    return at.Error(std::string("invalid zstd frame: ") + ZSTD_getErrorName(frame_size));
  }
  if (frame_size != src.size()) {
    return at.Error("zstd data is not exactly one frame (" + std::to_string(frame_size) +
                    " of " + std::to_string(src.size()) + " bytes)");
  }
  unsigned long long declared = ZSTD_getFrameContentSize(src.data(), src.size());
  if (declared == ZSTD_CONTENTSIZE_ERROR) return at.Error("invalid zstd frame header");
  if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared > max_body) {
    return at.Error("zstd frame declares " + std::to_string(declared) +
                    " decoded bytes, over the limit of " + std::to_string(max_body));
  }
  std::unique_ptr<ZSTD_DCtx, DctxFree> dctx(ZSTD_createDCtx());
  if (!dctx) return InternalError("ZSTD_createDCtx failed");
  // Grow the output as bytes are actually produced: a declared size is only
  // a hint, never trusted for the allocation.
  Buffer out;
  size_t cap = 1 << 16;
  if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared < cap) cap = declared + 1;
  out.resize(cap);
  size_t produced = 0;
  ZSTD_inBuffer in{src.data(), src.size(), 0};
  while (true) {
    if (produced == out.size()) {
      // Stop as soon as the output passes the limit: never decode further.
      if (out.size() > max_body) {
        return at.Error("zstd body decodes to more bytes than allowed, over the limit of " +
                        std::to_string(max_body));
      }
      out.resize(std::min<uint64_t>(uint64_t{out.size()} * 2, max_body + 1));
    }
    ZSTD_outBuffer o{out.data(), out.size(), produced};
    size_t r = ZSTD_decompressStream(dctx.get(), &o, &in);
    if (ZSTD_isError(r)) {
      return at.Error(std::string("zstd decompression failed: ") + ZSTD_getErrorName(r));
    }
    produced = o.pos;
    if (r == 0) break;  // frame complete
    if (in.pos == in.size && o.pos < o.size) return at.Error("truncated zstd frame");
  }
  if (in.pos != in.size) return at.Error("bytes after the zstd frame");
  if (declared != ZSTD_CONTENTSIZE_UNKNOWN && declared != produced) {
    return at.Error("zstd frame size mismatch");
  }
  out.resize(produced);
  return out;
}

}  // namespace

Result<Buffer> EncodeEnvelope(uint32_t magic, ByteView body, const CompressionOptions& options) {
  Buffer out;
  uint8_t hdr[kHeaderFixedBytes];
  hdr[0] = static_cast<uint8_t>(magic >> 24);
  hdr[1] = static_cast<uint8_t>(magic >> 16);
  hdr[2] = static_cast<uint8_t>(magic >> 8);
  hdr[3] = static_cast<uint8_t>(magic);
  StoreLE64(hdr + 4, 0);  // patched below
  out.append(ByteView(hdr, sizeof(hdr)));
  AppendVarint64(&out, 0);  // format_version
  AppendVarint64(&out, static_cast<uint8_t>(options.method));
  if (options.method == CompressionMethod::kZstd) {
    size_t bound = ZSTD_compressBound(body.size());
    size_t start = out.size();
    out.resize(start + bound);
    size_t n = ZSTD_compress(out.data() + start, bound, body.data(), body.size(),
                             options.zstd_level == 0 ? ZSTD_CLEVEL_DEFAULT : options.zstd_level);
    if (ZSTD_isError(n)) {
      return InternalError(std::string("zstd compression failed: ") + ZSTD_getErrorName(n));
    }
    out.resize(start + n);
  } else {
    out.append(body);
  }
  StoreLE64(out.data() + 4, out.size() + 4);
  uint32_t crc = Crc32c(out.view());
  AppendLE32(&out, crc);
  return out;
}

Result<Buffer> DecodeEnvelope(uint32_t magic, ByteView encoded, std::string_view what,
                              uint64_t max_body_bytes) {
  max_body_bytes = std::min(max_body_bytes, kMaxDecodedObjectBytes);
  FieldReader r(encoded, what);
  if (encoded.size() < kMinEnvelopeBytes) {
    return r.Error("object of " + std::to_string(encoded.size()) +
                   " bytes is shorter than the 16-byte minimum");
  }
  uint32_t got_magic = (uint32_t{encoded[0]} << 24) | (uint32_t{encoded[1]} << 16) |
                       (uint32_t{encoded[2]} << 8) | encoded[3];
  if (got_magic != magic) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "magic 0x%08x, expected 0x%08x", got_magic, magic);
    return r.Error(buf);
  }
  uint64_t length = LoadLE64(encoded.data() + 4);
  if (length != encoded.size()) {
    return r.Error("length field " + std::to_string(length) + " != object size " +
                   std::to_string(encoded.size()));
  }
  uint32_t stored_crc = LoadLE32(encoded.data() + encoded.size() - 4);
  uint32_t actual_crc = Crc32c(encoded.first(encoded.size() - 4));
  if (stored_crc != actual_crc) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "crc32c mismatch (stored 0x%08x, computed 0x%08x)",
                  stored_crc, actual_crc);
    return r.Error(buf);
  }
  FieldReader h(encoded.first(encoded.size() - 4), what);
  ByteView header;
  CAIRN_RETURN_IF_ERROR(h.Bytes(kHeaderFixedBytes, &header, "header"));
  uint64_t version, compression;
  CAIRN_RETURN_IF_ERROR(h.Varint64(&version, "format_version"));
  if (version != 0) return h.Error("unsupported format_version " + std::to_string(version));
  CAIRN_RETURN_IF_ERROR(h.Varint64(&compression, "compression_format"));
  ByteView payload;
  CAIRN_RETURN_IF_ERROR(h.Bytes(h.remaining(), &payload, "body"));
  if (compression == 0) {
    if (payload.size() > max_body_bytes) {
      return h.Error("body of " + std::to_string(payload.size()) +
                     " bytes is over the limit of " + std::to_string(max_body_bytes));
    }
    return Buffer::CopyOf(payload);
  }
  if (compression == 1) return ZstdDecompressOneFrame(payload, h, max_body_bytes);
  return h.Error("unsupported compression_format " + std::to_string(compression));
}

}  // namespace cairn::ocdbt
