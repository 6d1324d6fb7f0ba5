#include "cairn/kvstore/ocdbt/io/ocdbt_spec.h"

#include "cairn/kvstore/url.h"
#include "cairn/util/hex.h"

namespace cairn::ocdbt {
namespace {

Status Bad(std::string_view what) {
  return InvalidArgumentError("OCDBT spec: " + std::string(what));
}

Result<std::shared_ptr<KvStore>> OpenBase(const Json& base) {
  if (base.is_string()) return OpenKvStore(base.get<std::string>());
  if (!base.is_object()) {
    return Bad("`base` must be a URL string or a {\"driver\", \"path\"} object");
  }
  CAIRN_RETURN_IF_ERROR(
      CheckOnlyMembers(base, {"driver", "path", "context"}, "OCDBT spec `base`"));
  CAIRN_ASSIGN_OR_RETURN(std::string driver, GetStringField(base, "driver"));
  std::string path;
  if (const Json* p = FindField(base, "path")) {
    CAIRN_ASSIGN_OR_RETURN(path, JsonToString(*p, "`base.path`"));
  }
  auto store = OpenKvStoreSpec(driver, path);
  if (!store.ok()) return store.status().Annotate("OCDBT spec");
  return store;
}

}  // namespace

Status ParseOcdbtConfig(const Json& j, Config* config) {
  CAIRN_RETURN_IF_ERROR(CheckOnlyMembers(
      j,
      {"uuid", "manifest_kind", "max_inline_value_bytes", "max_decoded_node_bytes",
       "version_tree_arity_log2", "compression"},
      "OCDBT spec `config`"));
  if (const Json* f = FindField(j, "uuid")) {
    CAIRN_ASSIGN_OR_RETURN(std::string hex, JsonToString(*f, "`config.uuid`"));
    if (hex.size() != 32) return Bad("`config.uuid` must be 32 hex digits");
    for (size_t i = 0; i < 16; ++i) {
      int hi = HexDigit(hex[2 * i]), lo = HexDigit(hex[2 * i + 1]);
      if (hi < 0 || lo < 0) return Bad("`config.uuid` must be 32 hex digits");
      config->uuid[i] = static_cast<uint8_t>(hi * 16 + lo);
    }
  }
  if (const Json* f = FindField(j, "manifest_kind")) {
    CAIRN_ASSIGN_OR_RETURN(std::string kind, JsonToString(*f, "`config.manifest_kind`"));
    if (kind == "single") {
      config->manifest_kind = ManifestKind::kSingle;
    } else if (kind == "numbered") {
      config->manifest_kind = ManifestKind::kNumbered;
    } else {
      return Bad("`config.manifest_kind` must be \"single\" or \"numbered\"");
    }
  }
  if (const Json* f = FindField(j, "max_inline_value_bytes")) {
    CAIRN_ASSIGN_OR_RETURN(uint64_t v, JsonToUInt(*f, "`config.max_inline_value_bytes`"));
    if (v > kMaxInlineValueBytes) return Bad("`config.max_inline_value_bytes` exceeds 1048576");
    config->max_inline_value_bytes = static_cast<uint32_t>(v);
  }
  if (const Json* f = FindField(j, "max_decoded_node_bytes")) {
    CAIRN_ASSIGN_OR_RETURN(uint64_t v, JsonToUInt(*f, "`config.max_decoded_node_bytes`"));
    if (v > UINT32_MAX) return Bad("`config.max_decoded_node_bytes` exceeds 2^32-1");
    config->max_decoded_node_bytes = static_cast<uint32_t>(v);
  }
  if (const Json* f = FindField(j, "version_tree_arity_log2")) {
    CAIRN_ASSIGN_OR_RETURN(uint64_t v, JsonToUInt(*f, "`config.version_tree_arity_log2`"));
    if (v < 1 || v > 16) return Bad("`config.version_tree_arity_log2` must be in 1..16");
    config->version_tree_arity_log2 = static_cast<uint8_t>(v);
  }
  if (const Json* f = FindField(j, "compression")) {
    if (f->is_null()) {
      config->compression.method = CompressionMethod::kNone;
    } else {
      CAIRN_RETURN_IF_ERROR(
          CheckOnlyMembers(*f, {"id", "level"}, "OCDBT spec `config.compression`"));
      CAIRN_ASSIGN_OR_RETURN(std::string id, GetStringField(*f, "id"));
      if (id != "zstd") return Bad("`config.compression.id` must be \"zstd\"");
      config->compression.method = CompressionMethod::kZstd;
      config->compression.zstd_level = 0;
      if (const Json* l = FindField(*f, "level")) {
        CAIRN_ASSIGN_OR_RETURN(int64_t level, JsonToInt(*l, "`config.compression.level`"));
        if (level < -131072 || level > 22) return Bad("`config.compression.level` out of range");
        config->compression.zstd_level = static_cast<int32_t>(level);
      }
    }
  }
  return Status::OK();
}

Result<OcdbtSpec> ParseOcdbtSpec(const Json& spec) {
  if (!spec.is_object()) return Bad("must be a JSON object");
  CAIRN_RETURN_IF_ERROR(CheckOnlyMembers(
      spec,
      {"driver", "base", "path", "config", "version", "target_data_file_size", "assume_config",
       "value_data_prefix", "btree_node_data_prefix", "version_tree_node_data_prefix",
       "experimental_read_coalescing_threshold_bytes", "experimental_read_coalescing_merged_bytes",
       "experimental_read_coalescing_interval", "cache_pool", "data_copy_concurrency",
       "context", "coordinator"},
      "OCDBT spec"));
  CAIRN_ASSIGN_OR_RETURN(std::string driver, GetStringField(spec, "driver"));
  if (driver != "ocdbt") return Bad("`driver` must be \"ocdbt\", got \"" + driver + "\"");
  OcdbtSpec out;
  CAIRN_ASSIGN_OR_RETURN(const Json* base, GetField(spec, "base"));
  CAIRN_ASSIGN_OR_RETURN(out.base, OpenBase(*base));
  if (const Json* p = FindField(spec, "path")) {
    CAIRN_ASSIGN_OR_RETURN(out.path, JsonToString(*p, "`path`"));
    if (!out.path.empty() && out.path.back() != '/') out.path += '/';
    if (!out.path.empty()) {
      CAIRN_RETURN_IF_ERROR(ValidateKey(out.path.substr(0, out.path.size() - 1)));
    }
  }
  if (const Json* c = FindField(spec, "config")) {
    CAIRN_RETURN_IF_ERROR(ParseOcdbtConfig(*c, &out.options.config));
    out.given_config = *c;
  }
  if (const Json* v = FindField(spec, "version")) {
    const Json* g = v;
    if (v->is_object()) {
      CAIRN_RETURN_IF_ERROR(CheckOnlyMembers(*v, {"generation"}, "OCDBT spec `version`"));
      CAIRN_ASSIGN_OR_RETURN(g, GetField(*v, "generation"));
    }
    CAIRN_ASSIGN_OR_RETURN(uint64_t gen, JsonToUInt(*g, "`version` (a generation number)"));
    if (gen == 0) return Bad("`version` generation numbers start at 1");
    out.options.generation = gen;
  }
  if (const Json* t = FindField(spec, "target_data_file_size")) {
    CAIRN_ASSIGN_OR_RETURN(out.options.target_data_file_size,
                           JsonToUInt(*t, "`target_data_file_size`"));
  }
  if (const Json* p = FindField(spec, "value_data_prefix")) {
    CAIRN_ASSIGN_OR_RETURN(out.options.data_prefix, JsonToString(*p, "`value_data_prefix`"));
    if (!out.options.data_prefix.empty()) {
      CAIRN_RETURN_IF_ERROR(ValidateKey(out.options.data_prefix + "x"));
    }
  }
  return out;
}

Result<std::shared_ptr<OcdbtKvStore>> OpenOcdbtSpec(const OcdbtSpec& spec) {
  auto store = std::make_shared<OcdbtKvStore>(spec.base, spec.options);
  CAIRN_ASSIGN_OR_RETURN(auto manifest, store->ReadManifest());
  if (manifest) {
    Config want = manifest->config;
    CAIRN_RETURN_IF_ERROR(ParseOcdbtConfig(spec.given_config, &want));
    if (!(want == manifest->config)) {
      return InvalidArgumentError("OCDBT spec: `config` " + DumpJson(spec.given_config) +
                                  " does not match the config of the existing database " +
                                  store->url() + ": " +
                                  DumpJson(OcdbtConfigToJson(manifest->config)));
    }
  }
  return store;
}

Json OcdbtConfigToJson(const Config& config) {
  std::string uuid = HexLower(config.uuid.data(), config.uuid.size());
  Json j = {{"uuid", uuid},
            {"manifest_kind",
             config.manifest_kind == ManifestKind::kSingle ? "single" : "numbered"},
            {"max_inline_value_bytes", config.max_inline_value_bytes},
            {"max_decoded_node_bytes", config.max_decoded_node_bytes},
            {"version_tree_arity_log2", config.version_tree_arity_log2}};
  if (config.compression.method == CompressionMethod::kNone) {
    j["compression"] = nullptr;
  } else {
    j["compression"] = {{"id", "zstd"}, {"level", config.compression.zstd_level}};
  }
  return j;
}

}  // namespace cairn::ocdbt
