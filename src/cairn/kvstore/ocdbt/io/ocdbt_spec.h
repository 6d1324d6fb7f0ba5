// Opening an OCDBT database from a TensorStore-style JSON spec, so a user can
// pass what they would give `tensorstore.KvStore.open`:
//
//   {"driver": "ocdbt",
//    "base": "file:///ckpt/7/state/"  (or {"driver": "file", "path": "/ckpt/7/state/"},
//                                       {"driver": "memory", "path": "x/"}),
//    "path": "params.w/",             optional key prefix inside the database
//    "config": {"max_inline_value_bytes": 1024, "max_decoded_node_bytes": 100000000,
//               "version_tree_arity_log2": 4, "manifest_kind": "single"|"numbered",
//               "compression": {"id": "zstd", "level": 0} or null, "uuid": "<32 hex>"},
//    "version": 3,                    or {"generation": 3}: read that generation
//    "target_data_file_size": 2147483648}
//
// `config` applies when the database is created; for an existing database
// every given config field must match the stored one (InvalidArgument
// otherwise, like TensorStore). TensorStore members that only tune caching,
// coalescing or contexts are accepted and ignored.
//
// Thread safety: stateless functions.
#pragma once

#include <memory>
#include <string_view>

#include "cairn/kvstore/ocdbt/io/ocdbt_kvstore.h"
#include "cairn/util/json.h"

namespace cairn::ocdbt {

struct OcdbtSpec {
  std::shared_ptr<KvStore> base;
  OcdbtOptions options;
  // Which config fields the spec gave (checked against an existing database).
  Json given_config = Json::object();
  std::string path;  // key prefix inside the database ("" or ending in '/')
};

// Parses a spec. Errors: InvalidArgument naming the bad member.
Result<OcdbtSpec> ParseOcdbtSpec(const Json& spec);

// Parses the `config` member alone into `config`.
Status ParseOcdbtConfig(const Json& j, Config* config);

// Opens the database a spec names, reading its manifest (if any) to check
// the given config. Returns the OCDBT store itself; the caller applies
// `spec.path` (MakePrefixKvStore).
Result<std::shared_ptr<OcdbtKvStore>> OpenOcdbtSpec(const OcdbtSpec& spec);

// The config as TensorStore's spec JSON writes it.
Json OcdbtConfigToJson(const Config& config);

}  // namespace cairn::ocdbt
