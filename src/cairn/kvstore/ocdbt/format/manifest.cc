#include "cairn/kvstore/ocdbt/format/manifest.h"

#include <cstdio>

namespace cairn::ocdbt {

Result<Buffer> EncodeManifest(const Manifest& m) {
  Buffer body;
  EncodeConfig(m.config, &body);
  if (m.config.manifest_kind == ManifestKind::kSingle) {
    if (m.versions.empty()) return InvalidArgumentError("manifest without versions");
    DataFileTableBuilder table;
    AddIds(m.versions, &table);
    AddIds(m.version_nodes, &table);
    table.Encode("", &body);
    EncodeLeafEntries(m.versions, table, &body);
    EncodeInteriorEntries(m.version_nodes, table, /*with_heights=*/true, &body);
  }
  return EncodeEnvelope(kManifestMagic, body.view(), m.config.compression);
}

Result<Manifest> DecodeManifest(ByteView encoded, std::string_view what) {
  CAIRN_ASSIGN_OR_RETURN(Buffer body, DecodeEnvelope(kManifestMagic, encoded, what));
  FieldReader r(body.view(), what);
  Manifest m;
  CAIRN_RETURN_IF_ERROR(DecodeConfig(r, &m.config));
  if (m.config.manifest_kind == ManifestKind::kNumbered) {
    CAIRN_RETURN_IF_ERROR(r.ExpectEnd());
    return m;
  }
  const uint8_t a = m.config.version_tree_arity_log2;
  CAIRN_ASSIGN_OR_RETURN(auto table, DecodeDataFileTable(r, ""));
  CAIRN_RETURN_IF_ERROR(DecodeLeafEntries(r, table, a, &m.versions));
  CAIRN_RETURN_IF_ERROR(DecodeInteriorEntries(r, table, a, 0, &m.version_nodes));
  CAIRN_RETURN_IF_ERROR(r.ExpectEnd());
  // Every version node must lie in the range its height allows, below the
  // inline versions.
  auto ranges = ManifestVersionNodeRanges(m.latest_generation(), a);
  for (const auto& node : m.version_nodes) {
    const VersionNodeRange* range = nullptr;
    for (const auto& rg : ranges) {
      if (rg.height == node.height) range = &rg;
    }
    if (range == nullptr || node.generation_number < range->min_generation ||
        node.generation_number > range->max_generation) {
      return r.Error("version node of height " + std::to_string(node.height) +
                     " with generation " + std::to_string(node.generation_number) +
                     " is outside the range allowed for latest generation " +
                     std::to_string(m.latest_generation()));
    }
    if (node.generation_number >= m.versions.front().generation_number) {
      return r.Error("version node generation " + std::to_string(node.generation_number) +
                     " overlaps the inline versions");
    }
  }
  return m;
}

std::string NumberedManifestKey(uint64_t generation) {
  char buf[40];
  std::snprintf(buf, sizeof(buf), "manifest.%016llx",
                static_cast<unsigned long long>(generation));
  return buf;
}

std::optional<uint64_t> ParseNumberedManifestKey(std::string_view key) {
  constexpr std::string_view kPrefix = "manifest.";
  if (key.size() != kPrefix.size() + 16 || key.substr(0, kPrefix.size()) != kPrefix) {
    return std::nullopt;
  }
  uint64_t v = 0;
  for (char c : key.substr(kPrefix.size())) {
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return std::nullopt;
    }
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  if (v == 0) return std::nullopt;
  return v;
}

}  // namespace cairn::ocdbt
