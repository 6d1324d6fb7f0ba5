#include "cairn/codec/zarr2_compressor.h"

#include "cairn/codec/blosc_codec.h"
#include "cairn/codec/gzip_codec.h"
#include "cairn/codec/zstd_codec.h"
#include "cairn/util/json.h"

namespace cairn {
namespace {

constexpr std::string_view kWhat = "zarr v2 compressor";

Result<int64_t> OptionalInt(const Json& obj, std::string_view field, int64_t default_value) {
  const Json* f = FindField(obj, field);
  if (f == nullptr) return default_value;
  return JsonToInt(*f, std::string(kWhat) + " " + std::string(field));
}

Result<Zarr2Compressor> ParseBlosc(const Json& c, DType dtype) {
  CAIRN_RETURN_IF_ERROR(
      CheckOnlyMembers(c, {"id", "cname", "clevel", "shuffle", "blocksize", "typesize"}, kWhat));
  std::string cname = "lz4";
  if (const Json* f = FindField(c, "cname")) {
    CAIRN_ASSIGN_OR_RETURN(cname, JsonToString(*f, "zarr v2 compressor cname"));
  }
  CAIRN_RETURN_IF_ERROR(CheckBloscCname(cname, kWhat));
  CAIRN_ASSIGN_OR_RETURN(int64_t clevel, OptionalInt(c, "clevel", 5));
  CAIRN_RETURN_IF_ERROR(CheckBloscClevel(clevel, kWhat));
  CAIRN_ASSIGN_OR_RETURN(int64_t shuffle, OptionalInt(c, "shuffle", -1));
  if (shuffle < -1 || shuffle > 2) {
    return InvalidArgumentError("zarr v2 compressor: blosc shuffle " + std::to_string(shuffle) +
                                " is not one of -1, 0, 1, 2");
  }
  CAIRN_ASSIGN_OR_RETURN(int64_t blocksize, OptionalInt(c, "blocksize", 0));
  if (blocksize < 0) {
    return InvalidArgumentError("zarr v2 compressor: blosc blocksize must be >= 0");
  }
  const size_t typesize = DTypeSize(dtype);
  BloscCodec::Shuffle mode;
  if (shuffle == -1) {
    mode = typesize == 1 ? BloscCodec::Shuffle::kBitShuffle : BloscCodec::Shuffle::kShuffle;
  } else {
    mode = static_cast<BloscCodec::Shuffle>(shuffle);
  }
  Zarr2Compressor r;
  r.codec = std::make_shared<const BloscCodec>(cname, static_cast<int>(clevel), mode,
                                               static_cast<int>(typesize),
                                               static_cast<uint64_t>(blocksize));
  r.json = {{"blocksize", blocksize},
            {"clevel", clevel},
            {"cname", cname},
            {"id", "blosc"},
            {"shuffle", shuffle}};
  return r;
}

}  // namespace

Result<Zarr2Compressor> ParseZarr2Compressor(const Json& compressor, DType dtype) {
  Zarr2Compressor r;
  if (compressor.is_null()) {
    r.json = nullptr;
    return r;
  }
  if (!compressor.is_object()) {
    return InvalidArgumentError("zarr v2 compressor: expected an object or null, got " +
                                DumpJson(compressor));
  }
  CAIRN_ASSIGN_OR_RETURN(std::string id, GetStringField(compressor, "id"));
  if (id == "blosc") return ParseBlosc(compressor, dtype);
  if (id == "zstd") {
    CAIRN_RETURN_IF_ERROR(CheckOnlyMembers(compressor, {"id", "level", "checksum", kZstdStoredMember}, kWhat));
    CAIRN_ASSIGN_OR_RETURN(int64_t level, OptionalInt(compressor, "level", 1));
    CAIRN_RETURN_IF_ERROR(CheckZstdLevel(level, kWhat));
    bool checksum = false, stored = false;
    if (const Json* f = FindField(compressor, "checksum")) {
      CAIRN_ASSIGN_OR_RETURN(checksum, JsonToBool(*f, "zarr v2 compressor checksum"));
    }
    if (const Json* f = FindField(compressor, kZstdStoredMember)) {
      CAIRN_ASSIGN_OR_RETURN(stored, JsonToBool(*f, "zarr v2 compressor " + std::string(kZstdStoredMember)));
    }
    r.codec = std::make_shared<const ZstdCodec>(static_cast<int>(level), checksum, stored);
    r.json = {{"id", "zstd"}, {"level", level}};
    if (checksum || stored) r.json["checksum"] = true;
    if (stored) r.json[kZstdStoredMember] = true;
    return r;
  }
  if (id == "zlib" || id == "gzip") {
    CAIRN_RETURN_IF_ERROR(CheckOnlyMembers(compressor, {"id", "level"}, kWhat));
    CAIRN_ASSIGN_OR_RETURN(int64_t level, OptionalInt(compressor, "level", 1));
    CAIRN_RETURN_IF_ERROR(CheckDeflateLevel(level, kWhat));
    r.codec = std::make_shared<const DeflateCodec>(
        id == "zlib" ? DeflateCodec::Format::kZlib : DeflateCodec::Format::kGzip,
        static_cast<int>(level));
    r.json = {{"id", id}, {"level", level}};
    return r;
  }
  return InvalidArgumentError("zarr v2 compressor: unsupported id \"" + id +
                              "\" (cairn reads blosc, zstd, zlib, gzip)");
}

Zarr2Compressor DefaultZarr2Compressor(DType dtype) {
  auto r = ParseZarr2Compressor(Json{{"id", "blosc"}}, dtype);
  return std::move(r).value();  // the defaults are valid
}

}  // namespace cairn
