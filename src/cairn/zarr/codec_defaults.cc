#include "cairn/zarr/codec_defaults.h"

#include <string>

#include "cairn/codec/registry.h"

namespace cairn {
namespace {

// Unknown names count as bytes->bytes here; CodecChain::FromJson rejects them.
CodecKind KindOf(const std::string& name) {
  const CodecRegistration* r = FindCodec(name);
  return r == nullptr ? CodecKind::kBytesToBytes : r->kind;
}

Json BytesCodecJson(DType dtype) {
  Json j = {{"name", "bytes"}};
  if (DTypeSize(dtype) > 1) j["configuration"] = {{"endian", "little"}};
  return j;
}

// Completes one codec object in place.
Status CompleteOne(Json& codec, DType dtype, size_t rank) {
  const std::string name = codec["name"].get<std::string>();
  Json config = Json::object();
  if (const Json* c = FindField(codec, "configuration")) {
    if (!c->is_object()) {
      return InvalidArgumentError("codecs: \"configuration\" of codec \"" + name +
                                  "\" must be an object, got " + DumpJson(*c));
    }
    config = *c;
  }
  const size_t elem_size = DTypeSize(dtype);
  if (name == "bytes") {
    if (elem_size > 1 && !config.contains("endian")) config["endian"] = "little";
  } else if (name == "transpose") {
    const Json* order = FindField(config, "order");
    if (order != nullptr && order->is_string()) {
      const std::string o = order->get<std::string>();
      if (o == "C" || o == "F") {
        Json perm = Json::array();
        for (size_t i = 0; i < rank; ++i) perm.push_back(o == "C" ? i : rank - 1 - i);
        config["order"] = perm;
      }
    }
  } else if (name == "zstd") {
    if (!config.contains("level")) config["level"] = 3;
    if (!config.contains("checksum")) config["checksum"] = false;
  } else if (name == "gzip") {
    if (!config.contains("level")) config["level"] = 6;
  } else if (name == "blosc") {
    if (!config.contains("cname")) config["cname"] = "lz4";
    if (!config.contains("clevel")) config["clevel"] = 5;
    if (!config.contains("blocksize")) config["blocksize"] = 0;
    if (!config.contains("typesize")) config["typesize"] = elem_size;
    if (!config.contains("shuffle")) {
      const Json& ts = config["typesize"];
      const bool one = ts.is_number_integer() && ts.get<int64_t>() == 1;
      config["shuffle"] = one ? "bitshuffle" : "shuffle";
    }
    if (config["shuffle"] == "noshuffle") config.erase("typesize");
  } else if (name == "sharding_indexed") {
    Json inner = config.contains("codecs") ? config["codecs"] : Json::array();
    CAIRN_ASSIGN_OR_RETURN(config["codecs"], CompleteCodecsJson(inner, dtype, rank));
    Json index = config.contains("index_codecs")
                     ? config["index_codecs"]
                     : Json::array({BytesCodecJson(DType::kUInt64), {{"name", "crc32c"}}});
    CAIRN_ASSIGN_OR_RETURN(config["index_codecs"],
                           CompleteCodecsJson(index, DType::kUInt64, rank + 1));
    const Json* loc = FindField(config, "index_location");
    if (loc != nullptr && *loc == "end") config.erase("index_location");
  }
  if (config.empty()) {
    codec.erase("configuration");
  } else {
    codec["configuration"] = std::move(config);
  }
  return Status::OK();
}

}  // namespace

Result<Json> CompleteCodecsJson(const Json& codecs, DType dtype, size_t rank) {
  if (!codecs.is_null() && !codecs.is_array()) {
    return InvalidArgumentError("codecs: expected a list, got " + DumpJson(codecs));
  }
  Json list = Json::array();
  if (codecs.is_array()) {
    for (const Json& c : codecs) {
      Json codec;
      if (c.is_string()) {
        codec = {{"name", c}};
      } else if (c.is_object() && FindField(c, "name") != nullptr && c["name"].is_string()) {
        codec = c;
      } else {
        return InvalidArgumentError("codecs: expected a codec name or {\"name\": ...}, got " +
                                    DumpJson(c));
      }
      CAIRN_RETURN_IF_ERROR(CompleteOne(codec, dtype, rank));
      list.push_back(std::move(codec));
    }
  }
  // Insert `bytes` after the leading array->array codecs when no
  // array->bytes codec follows them.
  size_t i = 0;
  while (i < list.size() &&
         KindOf(list[i]["name"].get<std::string>()) == CodecKind::kArrayToArray) {
    ++i;
  }
  if (i == list.size() || KindOf(list[i]["name"].get<std::string>()) != CodecKind::kArrayToBytes) {
    list.insert(list.begin() + static_cast<std::ptrdiff_t>(i), BytesCodecJson(dtype));
  }
  return list;
}

}  // namespace cairn
