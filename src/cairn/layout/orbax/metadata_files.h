// The small JSON files of an Orbax checkpoint besides `_METADATA`:
//
//   <step>/_CHECKPOINT_METADATA      item handlers, timestamps, metrics
//   <item>/array_metadatas/process_<i>  write/chunk shapes, random key impls
//   <item>/_sharding                 {base64url(param): "<sharding json>"}
//   <item>/_strings.json             {param: "string value"}
//
// Thread safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "cairn/util/json.h"
#include "cairn/result.h"

namespace cairn::orbax {

inline constexpr std::string_view kCheckpointMetadataFile = "_CHECKPOINT_METADATA";
inline constexpr std::string_view kTreeMetadataFile = "_METADATA";
inline constexpr std::string_view kShardingFile = "_sharding";
inline constexpr std::string_view kStringsFile = "_strings.json";
inline constexpr std::string_view kArrayMetadatasDir = "array_metadatas";
inline constexpr std::string_view kCommitSuccessFile = "commit_success.txt";
inline constexpr std::string_view kOcdbtManifestFile = "manifest.ocdbt";
inline constexpr std::string_view kProcessSubdirPrefix = "ocdbt.process_";

// Handler typestrs Orbax resolves when restoring without explicit args.
inline constexpr std::string_view kPyTreeHandler =
    "orbax.checkpoint._src.handlers.pytree_checkpoint_handler.PyTreeCheckpointHandler";
inline constexpr std::string_view kStandardHandler =
    "orbax.checkpoint._src.handlers.standard_checkpoint_handler.StandardCheckpointHandler";

struct CheckpointMetadata {
  // A single handler (a non-composite checkpointer) or one per item name.
  std::variant<std::monostate, std::string, std::map<std::string, std::string>> item_handlers;
  Json metrics = Json::object();
  Json performance_metrics = Json::object();
  std::optional<int64_t> init_timestamp_nsecs;
  std::optional<int64_t> commit_timestamp_nsecs;
  Json custom_metadata = Json::object();
};

// Parses `_CHECKPOINT_METADATA`. Unknown top-level keys move into
// custom_metadata (as Orbax does). `where` names the file in errors.
Result<CheckpointMetadata> ParseCheckpointMetadata(std::string_view text, std::string_view where);
std::string EmitCheckpointMetadata(const CheckpointMetadata& md);

// One record of array_metadatas/process_<i>.
struct ArrayMetadataRecord {
  std::string param_name;
  std::vector<int64_t> write_shape;
  std::vector<int64_t> chunk_shape;
  std::optional<std::string> random_key_impl;  // ext_metadata.random_key_impl
  bool operator==(const ArrayMetadataRecord& o) const {
    return param_name == o.param_name && write_shape == o.write_shape &&
           chunk_shape == o.chunk_shape && random_key_impl == o.random_key_impl;
  }
};

Result<std::vector<ArrayMetadataRecord>> ParseArrayMetadatas(std::string_view text,
                                                             std::string_view where);
std::string EmitArrayMetadatas(const std::vector<ArrayMetadataRecord>& records);

// Checks that every process reported the same params with the same shapes
// and key impls (Orbax's finalize-time validation). `per_process[i]` is the
// list of process i. FailedPrecondition naming the param and processes.
Status ValidateArrayMetadatas(const std::vector<std::vector<ArrayMetadataRecord>>& per_process);

// `_sharding`: param name -> sharding JSON text (kept as text).
Result<std::map<std::string, std::string>> ParseShardingFile(std::string_view text,
                                                             std::string_view where);
std::string EmitShardingFile(const std::map<std::string, std::string>& shardings);

// `_strings.json`: param name -> value.
Result<std::map<std::string, std::string>> ParseStringsFile(std::string_view text,
                                                            std::string_view where);
std::string EmitStringsFile(const std::map<std::string, std::string>& strings);

// RFC 4648 §5 base64url with '=' padding (Python's urlsafe_b64encode).
std::string Base64UrlEncode(std::string_view bytes);
// Accepts padded or unpadded input; InvalidArgument on other characters.
Result<std::string> Base64UrlDecode(std::string_view text);

}  // namespace cairn::orbax
