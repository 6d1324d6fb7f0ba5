#include "cairn/codec/zstd_codec.h"

#include <zstd.h>

#include <algorithm>
#include <cstring>

#include "cairn/util/coding.h"
#include "cairn/util/json.h"
#include "cairn/util/xxhash64.h"

namespace cairn {
namespace {

struct CCtxDeleter {
  void operator()(ZSTD_CCtx* c) const { ZSTD_freeCCtx(c); }
};
struct DCtxDeleter {
  void operator()(ZSTD_DCtx* c) const { ZSTD_freeDCtx(c); }
};

// One context of each kind per thread, reset before every use.
ZSTD_CCtx* ThreadCCtx() {
  thread_local std::unique_ptr<ZSTD_CCtx, CCtxDeleter> ctx(ZSTD_createCCtx());
  if (ctx) ZSTD_CCtx_reset(ctx.get(), ZSTD_reset_session_and_parameters);
  return ctx.get();
}
ZSTD_DCtx* ThreadDCtx() {
  thread_local std::unique_ptr<ZSTD_DCtx, DCtxDeleter> ctx(ZSTD_createDCtx());
  if (ctx) ZSTD_DCtx_reset(ctx.get(), ZSTD_reset_session_and_parameters);
  return ctx.get();
}

std::string ZstdError(size_t code) { return ZSTD_getErrorName(code); }

// A frame can expand by at most ~32768x (a 4-byte RLE block yields 128 KiB);
// a declared size beyond a generous multiple of the input is decoded in
// bounded steps instead of being trusted for one allocation.
constexpr uint64_t kTrustedExpansion = 64;

}  // namespace

Status CheckZstdLevel(int64_t level, std::string_view what) {
  if (level < ZSTD_minCLevel() || level > ZSTD_maxCLevel()) {
    return InvalidArgumentError(std::string(what) + ": level " + std::to_string(level) +
                                " is outside " + std::to_string(ZSTD_minCLevel()) + ".." +
                                std::to_string(ZSTD_maxCLevel()));
  }
  return Status::OK();
}

Result<std::shared_ptr<const ZstdCodec>> ZstdCodec::FromJson(const Json* configuration) {
  if (configuration == nullptr) {
    return InvalidArgumentError("zstd codec: missing configuration with \"level\"");
  }
  CAIRN_RETURN_IF_ERROR(CheckOnlyMembers(*configuration, {"level", "checksum"}, "zstd codec"));
  CAIRN_ASSIGN_OR_RETURN(const Json* level_json, GetField(*configuration, "level"));
  CAIRN_ASSIGN_OR_RETURN(int64_t level, JsonToInt(*level_json, "zstd codec level"));
  CAIRN_RETURN_IF_ERROR(CheckZstdLevel(level, "zstd codec"));
  bool checksum = false;
  if (const Json* c = FindField(*configuration, "checksum")) {
    CAIRN_ASSIGN_OR_RETURN(checksum, JsonToBool(*c, "zstd codec checksum"));
  }
  return std::make_shared<const ZstdCodec>(static_cast<int>(level), checksum);
}

Json ZstdCodec::ToJson() const {
  return {{"name", "zstd"}, {"configuration", {{"checksum", checksum_}, {"level", level_}}}};
}

uint64_t ZstdCodec::MaxEncodedSize(uint64_t decoded_size) const {
  return ZSTD_compressBound(decoded_size);
}

Buffer ZstdCodec::EncodeStoredFrame(ByteView content) {
  constexpr size_t kMaxBlock = 128 << 10;  // Block_Maximum_Size with a 128 KiB window
  const size_t blocks = content.empty() ? 1 : (content.size() + kMaxBlock - 1) / kMaxBlock;
  Buffer out(4 + 1 + 1 + 8 + 3 * blocks + content.size() + 4);
  uint8_t* p = out.data();
  StoreLE32(p, 0xFD2FB528u);  // Magic_Number
  p[4] = 0xC4;  // Frame_Header_Descriptor: 8-byte Frame_Content_Size, Content_Checksum_flag
  p[5] = 0x38;  // Window_Descriptor: Exponent 7, Mantissa 0: a 128 KiB window
  StoreLE64(p + 6, content.size());
  p += 14;
  size_t at = 0;
  for (size_t b = 0; b < blocks; ++b) {
    const size_t n = std::min(kMaxBlock, content.size() - at);
    const uint32_t header = (b + 1 == blocks ? 1u : 0u) | (0u << 1) | static_cast<uint32_t>(n) << 3;  // Raw_Block
    p[0] = static_cast<uint8_t>(header);
    p[1] = static_cast<uint8_t>(header >> 8);
    p[2] = static_cast<uint8_t>(header >> 16);
    if (n > 0) std::memcpy(p + 3, content.data() + at, n);
    p += 3 + n;
    at += n;
  }
  StoreLE32(p, static_cast<uint32_t>(Xxh64(content)));  // Content_Checksum
  return out;
}

Result<Buffer> ZstdCodec::Encode(ByteView decoded) const {
  if (stored_) return EncodeStoredFrame(decoded);
  ZSTD_CCtx* cctx = ThreadCCtx();
  if (cctx == nullptr) return ResourceExhaustedError("zstd codec: cannot allocate a context");
  size_t rc = ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level_);
  if (!ZSTD_isError(rc)) rc = ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, checksum_ ? 1 : 0);
  if (!ZSTD_isError(rc)) rc = ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
  if (ZSTD_isError(rc)) return InvalidArgumentError("zstd codec: " + ZstdError(rc));
  Buffer out(ZSTD_compressBound(decoded.size()));
  const size_t n =
      ZSTD_compress2(cctx, out.data(), out.size(), decoded.data(), decoded.size());
  if (ZSTD_isError(n)) return InternalError("zstd codec: compression failed: " + ZstdError(n));
  out.resize(n);
  return out;
}

Status ZstdCodec::DecodeInto(ByteView encoded, MutableByteView out) const {
  const unsigned long long declared = ZSTD_getFrameContentSize(encoded.data(), encoded.size());
  if (declared != out.size()) {
    // Not a frame of exactly out.size() (an error, an undeclared size, or
    // several frames): Decode bounded by out.size() sorts it out.
    return BytesCodec::DecodeInto(encoded, out);
  }
  ZSTD_DCtx* dctx = ThreadDCtx();
  if (dctx == nullptr) return ResourceExhaustedError("zstd codec: cannot allocate a context");
  const size_t n = ZSTD_decompressDCtx(dctx, out.data(), out.size(), encoded.data(), encoded.size());
  if (ZSTD_isError(n)) return DataLossError("zstd codec: " + ZstdError(n));
  if (n != out.size()) {
    return DataLossError("zstd codec: frame decoded to " + std::to_string(n) + " bytes but declares " +
                         std::to_string(out.size()));
  }
  return Status::OK();
}

Result<Buffer> ZstdCodec::Decode(ByteView encoded, uint64_t max_decoded_size) const {
  ZSTD_DCtx* dctx = ThreadDCtx();
  if (dctx == nullptr) return ResourceExhaustedError("zstd codec: cannot allocate a context");
  const unsigned long long declared = ZSTD_getFrameContentSize(encoded.data(), encoded.size());
  if (declared == ZSTD_CONTENTSIZE_ERROR) {
    return DataLossError("zstd codec: not a zstd frame (" + std::to_string(encoded.size()) +
                         " bytes)");
  }
  if (declared != ZSTD_CONTENTSIZE_UNKNOWN) {
    if (declared > max_decoded_size) {
      return DataLossError("zstd codec: frame declares " + std::to_string(declared) +
                           " decoded bytes, more than the " + std::to_string(max_decoded_size) +
                           " expected");
    }
    // One-shot decode for a declared size the input can plausibly produce.
    if (declared <= kTrustedExpansion * encoded.size() + 4096) {
      Buffer out(static_cast<size_t>(declared));
      const size_t n =
          ZSTD_decompressDCtx(dctx, out.data(), out.size(), encoded.data(), encoded.size());
      if (ZSTD_isError(n)) return DataLossError("zstd codec: " + ZstdError(n));
      if (n != declared) {
        return DataLossError("zstd codec: frame decoded to " + std::to_string(n) +
                             " bytes but declares " + std::to_string(declared));
      }
      return out;
    }
  }
  // Streaming decode, growing the output up to one byte past the bound so
  // that exceeding it is observable.
  const uint64_t limit = declared != ZSTD_CONTENTSIZE_UNKNOWN ? declared : max_decoded_size;
  const uint64_t cap = limit == UINT64_MAX ? UINT64_MAX : limit + 1;
  Buffer out(static_cast<size_t>(std::min<uint64_t>(
      cap, std::max<uint64_t>(64 * 1024, 4 * static_cast<uint64_t>(encoded.size())))));
  ZSTD_inBuffer in = {encoded.data(), encoded.size(), 0};
  size_t produced = 0;
  for (;;) {
    ZSTD_outBuffer o = {out.data(), out.size(), produced};
    const size_t rc = ZSTD_decompressStream(dctx, &o, &in);
    if (ZSTD_isError(rc)) return DataLossError("zstd codec: " + ZstdError(rc));
    produced = o.pos;
    if (rc == 0) break;  // frame complete
    if (produced < out.size()) {
      if (in.pos == in.size) {
        return DataLossError("zstd codec: truncated frame (" + std::to_string(encoded.size()) +
                             " bytes)");
      }
      continue;
    }
    if (out.size() >= cap) break;  // reported below
    out.resize(static_cast<size_t>(std::min<uint64_t>(cap, 2 * uint64_t{out.size()})));
  }
  if (produced > limit) {
    return DataLossError("zstd codec: frame decodes to more than " + std::to_string(limit) +
                         " bytes");
  }
  if (in.pos != in.size) {
    return DataLossError("zstd codec: " + std::to_string(in.size - in.pos) +
                         " bytes after the end of the frame");
  }
  if (declared != ZSTD_CONTENTSIZE_UNKNOWN && produced != declared) {
    return DataLossError("zstd codec: frame decoded to " + std::to_string(produced) +
                         " bytes but declares " + std::to_string(declared));
  }
  out.resize(produced);
  return out;
}

}  // namespace cairn
