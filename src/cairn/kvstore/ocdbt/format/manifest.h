// The manifest (docs/formats/ocdbt.md): config plus, for the single-file kind, the version
// tree's top (inline versions and version nodes).
//
// `manifest.ocdbt` of the numbered kind holds only the config; the full
// manifests are `manifest.%016x` files, encoded with manifest_kind single.
//
// Pure functions: no I/O, no threads. Thread safety: value types.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/kvstore/ocdbt/format/config.h"
#include "cairn/kvstore/ocdbt/format/version_tree.h"

namespace cairn::ocdbt {

inline constexpr std::string_view kManifestKey = "manifest.ocdbt";

struct Manifest {
  Config config;
  // Empty only for a config-only (numbered-kind) manifest.ocdbt.
  std::vector<BtreeGenerationReference> versions;
  // Highest height first.
  std::vector<VersionNodeReference> version_nodes;

  uint64_t latest_generation() const {
    return versions.empty() ? 0 : versions.back().generation_number;
  }
};

// Errors: InvalidArgument for a single-kind manifest without versions.
Result<Buffer> EncodeManifest(const Manifest& manifest);

// Decodes and validates a whole manifest file. For manifest_kind numbered
// the body ends after the config (versions stay empty). Errors: DataLoss
// naming `what` for any violation of the format, including version
// nodes outside the ranges ManifestVersionNodeRanges allows.
Result<Manifest> DecodeManifest(ByteView encoded, std::string_view what);

// "manifest.%016x" for a numbered-kind manifest of `generation`.
std::string NumberedManifestKey(uint64_t generation);
// The generation of a numbered manifest key, or nullopt when `key` is not
// exactly "manifest." + 16 lowercase hex digits with a non-zero value.
std::optional<uint64_t> ParseNumberedManifestKey(std::string_view key);

}  // namespace cairn::ocdbt
