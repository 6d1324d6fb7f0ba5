// libFuzzer target for the small JSON files of an Orbax checkpoint:
// `_CHECKPOINT_METADATA`, `_sharding`, `array_metadatas/process_<i>` and
// `_strings.json` (one decoder family: layout/orbax/metadata_files.h), plus
// base64url keys of `_sharding`.
//
// The input is parsed as each file; what parses is emitted again and the
// emitted text must parse. Parsers must return a Status, never crash,
// overflow the stack or allocate without bound; any other outcome is a
// finding.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "cairn/layout/orbax/metadata_files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cairn::orbax;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (auto md = ParseCheckpointMetadata(text, "fuzz _CHECKPOINT_METADATA"); md.ok()) {
    if (!ParseCheckpointMetadata(EmitCheckpointMetadata(*md), "emitted").ok()) __builtin_trap();
  }
  if (auto sharding = ParseShardingFile(text, "fuzz _sharding"); sharding.ok()) {
    for (const auto& [key, value] : *sharding) (void)Base64UrlDecode(key);
    if (!ParseShardingFile(EmitShardingFile(*sharding), "emitted").ok()) __builtin_trap();
  }
  if (auto records = ParseArrayMetadatas(text, "fuzz array_metadatas"); records.ok()) {
    (void)ValidateArrayMetadatas({*records, *records});
    if (!ParseArrayMetadatas(EmitArrayMetadatas(*records), "emitted").ok()) __builtin_trap();
  }
  if (auto strings = ParseStringsFile(text, "fuzz _strings.json"); strings.ok()) {
    if (!ParseStringsFile(EmitStringsFile(*strings), "emitted").ok()) __builtin_trap();
  }
  (void)Base64UrlDecode(text);
  return 0;
}
