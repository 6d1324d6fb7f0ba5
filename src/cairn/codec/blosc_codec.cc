#include "cairn/codec/blosc_codec.h"

#include <blosc.h>

#include "cairn/util/coding.h"
#include "cairn/util/json.h"

namespace cairn {
namespace {

constexpr size_t kHeaderSize = 16;  // BLOSC_MIN_HEADER_LENGTH

const char* ShuffleName(BloscCodec::Shuffle s) {
  switch (s) {
    case BloscCodec::Shuffle::kNoShuffle: return "noshuffle";
    case BloscCodec::Shuffle::kShuffle: return "shuffle";
    case BloscCodec::Shuffle::kBitShuffle: return "bitshuffle";
  }
  return "noshuffle";
}

}  // namespace

Status CheckBloscCname(std::string_view cname, std::string_view what) {
  for (std::string_view known : {"blosclz", "lz4", "lz4hc", "snappy", "zlib", "zstd"}) {
    if (cname == known) return Status::OK();
  }
  return InvalidArgumentError(std::string(what) + ": unknown cname \"" + std::string(cname) +
                              "\" (expected blosclz, lz4, lz4hc, snappy, zlib or zstd)");
}

Status CheckBloscClevel(int64_t clevel, std::string_view what) {
  if (clevel < 0 || clevel > 9) {
    return InvalidArgumentError(std::string(what) + ": clevel " + std::to_string(clevel) +
                                " is outside 0..9");
  }
  return Status::OK();
}

Result<std::shared_ptr<const BloscCodec>> BloscCodec::FromJson(const Json* configuration,
                                                              const ChunkSpec& spec) {
  constexpr std::string_view kWhat = "blosc codec";
  if (configuration == nullptr) return InvalidArgumentError("blosc codec: missing configuration");
  CAIRN_RETURN_IF_ERROR(CheckOnlyMembers(
      *configuration, {"cname", "clevel", "shuffle", "typesize", "blocksize"}, kWhat));
  CAIRN_ASSIGN_OR_RETURN(std::string cname, GetStringField(*configuration, "cname"));
  CAIRN_RETURN_IF_ERROR(CheckBloscCname(cname, kWhat));
  CAIRN_ASSIGN_OR_RETURN(int64_t clevel, GetIntField(*configuration, "clevel"));
  CAIRN_RETURN_IF_ERROR(CheckBloscClevel(clevel, kWhat));
  CAIRN_ASSIGN_OR_RETURN(std::string shuffle_name, GetStringField(*configuration, "shuffle"));
  Shuffle shuffle;
  if (shuffle_name == "noshuffle") {
    shuffle = Shuffle::kNoShuffle;
  } else if (shuffle_name == "shuffle") {
    shuffle = Shuffle::kShuffle;
  } else if (shuffle_name == "bitshuffle") {
    shuffle = Shuffle::kBitShuffle;
  } else {
    return InvalidArgumentError("blosc codec: shuffle must be \"noshuffle\", \"shuffle\" or "
                                "\"bitshuffle\", got \"" + shuffle_name + "\"");
  }
  int64_t typesize = static_cast<int64_t>(DTypeSize(spec.dtype));
  if (const Json* t = FindField(*configuration, "typesize")) {
    CAIRN_ASSIGN_OR_RETURN(typesize, JsonToInt(*t, "blosc codec typesize"));
  } else if (shuffle != Shuffle::kNoShuffle) {
    return InvalidArgumentError("blosc codec: \"typesize\" is required with shuffle \"" +
                                shuffle_name + "\"");
  }
  if (typesize < 1 || typesize > 255) {
    return InvalidArgumentError("blosc codec: typesize " + std::to_string(typesize) +
                                " is outside 1..255");
  }
  CAIRN_ASSIGN_OR_RETURN(const Json* bs_json, GetField(*configuration, "blocksize"));
  CAIRN_ASSIGN_OR_RETURN(uint64_t blocksize, JsonToUInt(*bs_json, "blosc codec blocksize"));
  return std::make_shared<const BloscCodec>(std::move(cname), static_cast<int>(clevel), shuffle,
                                            static_cast<int>(typesize), blocksize);
}

Json BloscCodec::ToJson() const {
  Json config = {{"blocksize", blocksize_},
                 {"clevel", clevel_},
                 {"cname", cname_},
                 {"shuffle", ShuffleName(shuffle_)}};
  if (shuffle_ != Shuffle::kNoShuffle) config["typesize"] = typesize_;
  return {{"name", "blosc"}, {"configuration", std::move(config)}};
}

uint64_t BloscCodec::MaxEncodedSize(uint64_t decoded_size) const {
  return decoded_size + BLOSC_MAX_OVERHEAD;
}

Result<Buffer> BloscCodec::Encode(ByteView decoded) const {
  if (decoded.size() > static_cast<size_t>(BLOSC_MAX_BUFFERSIZE)) {
    return InvalidArgumentError("blosc codec: " + std::to_string(decoded.size()) +
                                " bytes exceed blosc's limit of " +
                                std::to_string(BLOSC_MAX_BUFFERSIZE) + " per chunk");
  }
  Buffer out(decoded.size() + BLOSC_MAX_OVERHEAD);
  const int n = blosc_compress_ctx(clevel_, static_cast<int>(shuffle_),
                                   static_cast<size_t>(typesize_), decoded.size(), decoded.data(),
                                   out.data(), out.size(), cname_.c_str(),
                                   static_cast<size_t>(blocksize_), /*numinternalthreads=*/1);
  if (n <= 0) {
    return InvalidArgumentError("blosc codec: compression with cname \"" + cname_ +
                                "\" failed (code " + std::to_string(n) + ")");
  }
  out.resize(static_cast<size_t>(n));
  return out;
}

Result<Buffer> BloscCodec::Decode(ByteView encoded, uint64_t max_decoded_size) const {
  if (encoded.size() < kHeaderSize) {
    return DataLossError("blosc codec: " + std::to_string(encoded.size()) +
                         " bytes is shorter than the 16-byte header");
  }
  const uint64_t nbytes = LoadLE32(encoded.data() + 4);
  const uint64_t cbytes = LoadLE32(encoded.data() + 12);
  if (cbytes != encoded.size()) {
    return DataLossError("blosc codec: header says " + std::to_string(cbytes) +
                         " compressed bytes, the chunk has " + std::to_string(encoded.size()));
  }
  if (nbytes > max_decoded_size) {
    return DataLossError("blosc codec: header says " + std::to_string(nbytes) +
                         " decoded bytes, more than the " + std::to_string(max_decoded_size) +
                         " expected");
  }
  size_t validated = 0;
  if (blosc_cbuffer_validate(encoded.data(), encoded.size(), &validated) != 0 ||
      validated != nbytes) {
    return DataLossError("blosc codec: invalid header (" + std::to_string(encoded.size()) +
                         " bytes)");
  }
  Buffer out(static_cast<size_t>(nbytes));
  if (nbytes == 0) return out;
  const int n = blosc_decompress_ctx(encoded.data(), out.data(), out.size(), 1);
  if (n < 0 || static_cast<uint64_t>(n) != nbytes) {
    return DataLossError("blosc codec: corrupt data (decompression returned " +
                         std::to_string(n) + ", expected " + std::to_string(nbytes) + " bytes)");
  }
  return out;
}

}  // namespace cairn
