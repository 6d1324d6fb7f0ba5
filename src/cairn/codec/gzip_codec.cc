#include "cairn/codec/gzip_codec.h"

#include <zlib.h>

#include <algorithm>
#include <climits>

#include "cairn/util/json.h"

namespace cairn {
namespace {

int WindowBits(DeflateCodec::Format f) { return f == DeflateCodec::Format::kGzip ? 16 + 15 : 15; }

// zlib counts in uInt: feed at most this much per call.
constexpr uint64_t kMaxStep = uint64_t{1} << 30;

}  // namespace

Status CheckDeflateLevel(int64_t level, std::string_view what) {
  if (level < 0 || level > 9) {
    return InvalidArgumentError(std::string(what) + ": level " + std::to_string(level) +
                                " is outside 0..9");
  }
  return Status::OK();
}

Result<std::shared_ptr<const DeflateCodec>> DeflateCodec::GzipFromJson(const Json* configuration) {
  if (configuration == nullptr) {
    return InvalidArgumentError("gzip codec: missing configuration with \"level\"");
  }
  CAIRN_RETURN_IF_ERROR(CheckOnlyMembers(*configuration, {"level"}, "gzip codec"));
  CAIRN_ASSIGN_OR_RETURN(const Json* level_json, GetField(*configuration, "level"));
  CAIRN_ASSIGN_OR_RETURN(int64_t level, JsonToInt(*level_json, "gzip codec level"));
  CAIRN_RETURN_IF_ERROR(CheckDeflateLevel(level, "gzip codec"));
  return std::make_shared<const DeflateCodec>(Format::kGzip, static_cast<int>(level));
}

Json DeflateCodec::ToJson() const {
  if (format_ == Format::kGzip) return {{"name", "gzip"}, {"configuration", {{"level", level_}}}};
  return {{"id", "zlib"}, {"level", level_}};
}

uint64_t DeflateCodec::MaxEncodedSize(uint64_t decoded_size) const {
  // deflateBound's formula for stored blocks plus the largest header/trailer.
  return decoded_size + (decoded_size >> 12) + (decoded_size >> 14) + (decoded_size >> 25) + 13 +
         6 + 18;
}

Result<Buffer> DeflateCodec::Encode(ByteView decoded) const {
  z_stream zs = {};
  if (deflateInit2(&zs, level_, Z_DEFLATED, WindowBits(format_), 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return ResourceExhaustedError(std::string(name()) + " codec: deflateInit2 failed");
  }
  Buffer out(static_cast<size_t>(deflateBound(&zs, decoded.size() > ULONG_MAX ? ULONG_MAX
                                                                                : decoded.size())));
  size_t in_pos = 0;
  int rc = Z_OK;
  while (rc != Z_STREAM_END) {
    if (zs.total_out == out.size()) out.resize(out.size() * 2 + 64);
    const size_t in_step =
        static_cast<size_t>(std::min<uint64_t>(kMaxStep, decoded.size() - in_pos));
    zs.next_in = const_cast<Bytef*>(decoded.data() + in_pos);
    zs.avail_in = static_cast<uInt>(in_step);
    const size_t out_pos = zs.total_out;
    zs.next_out = out.data() + out_pos;
    zs.avail_out = static_cast<uInt>(std::min<uint64_t>(kMaxStep, out.size() - out_pos));
    const bool last = in_pos + in_step == decoded.size();
    rc = deflate(&zs, last ? Z_FINISH : Z_NO_FLUSH);
    in_pos += in_step - zs.avail_in;
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) {
      deflateEnd(&zs);
      return InternalError(std::string(name()) + " codec: deflate failed");
    }
  }
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return out;
}

Result<Buffer> DeflateCodec::Decode(ByteView encoded, uint64_t max_decoded_size) const {
  const std::string what = std::string(name()) + " codec";
  z_stream zs = {};
  if (inflateInit2(&zs, WindowBits(format_)) != Z_OK) {
    return ResourceExhaustedError(what + ": inflateInit2 failed");
  }
  // One byte more than allowed, so that exceeding the bound is observable.
  const uint64_t cap = max_decoded_size == UINT64_MAX ? UINT64_MAX : max_decoded_size + 1;
  Buffer out(static_cast<size_t>(
      std::min<uint64_t>(cap, std::max<uint64_t>(64 * 1024, 4 * uint64_t{encoded.size()}))));
  size_t in_pos = 0, produced = 0;
  int rc = Z_OK;
  Status error;
  while (true) {
    if (produced == out.size()) {
      if (out.size() >= cap) {
        error = DataLossError(what + ": stream decodes to more than " +
                              std::to_string(max_decoded_size) + " bytes");
        break;
      }
      out.resize(static_cast<size_t>(std::min<uint64_t>(cap, 2 * uint64_t{out.size()})));
    }
    const size_t in_step =
        static_cast<size_t>(std::min<uint64_t>(kMaxStep, encoded.size() - in_pos));
    zs.next_in = const_cast<Bytef*>(encoded.data() + in_pos);
    zs.avail_in = static_cast<uInt>(in_step);
    zs.next_out = out.data() + produced;
    zs.avail_out = static_cast<uInt>(std::min<uint64_t>(kMaxStep, out.size() - produced));
    const uInt avail_out_before = zs.avail_out;
    rc = inflate(&zs, Z_NO_FLUSH);
    in_pos += in_step - zs.avail_in;
    produced += avail_out_before - zs.avail_out;
    if (rc == Z_STREAM_END) break;
    if (rc == Z_BUF_ERROR && in_pos == encoded.size() && zs.avail_out != 0) {
      error = DataLossError(what + ": truncated stream (" + std::to_string(encoded.size()) +
                            " bytes)");
      break;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) {
      error = DataLossError(what + ": " + (zs.msg ? zs.msg : "invalid stream"));
      break;
    }
  }
  inflateEnd(&zs);
  CAIRN_RETURN_IF_ERROR(error);
  if (produced > max_decoded_size) {
    return DataLossError(what + ": stream decodes to more than " +
                         std::to_string(max_decoded_size) + " bytes");
  }
  if (in_pos != encoded.size()) {
    return DataLossError(what + ": " + std::to_string(encoded.size() - in_pos) +
                         " bytes after the end of the stream");
  }
  out.resize(produced);
  return out;
}

}  // namespace cairn
