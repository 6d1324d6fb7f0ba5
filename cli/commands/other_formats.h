// The checkpoints `cairn ls/info/verify` read through the checkpoint-format
// interface (layout/checkpoint_format.h) rather than the Orbax inspector:
// AXLearn steps and roots, safetensors files and sets.
#pragma once

#include <cstdio>
#include <optional>
#include <string>

#include "cairn/emergency/tier_info.h"

#include "cairn/engine/convert/convert_checkpoint.h"
#include "cairn/layout/open_checkpoint.h"

namespace cairn::cli {

// The AXLearn or safetensors checkpoint at `path_or_url`: nullopt when there
// is none there (an Orbax checkpoint, a zarr pipeline URL, nothing); an
// error when one is there but does not open (a broken AXLearn index: the
// error names the file and what is wrong), so that it is not taken for "no
// Orbax checkpoint".
inline std::optional<Result<layout::OpenedCheckpoint>> OpenOtherFormat(const std::string& path_or_url) {
  if (path_or_url.find('|') != std::string::npos) return std::nullopt;
  auto where = engine::OpenUserLocation(path_or_url);
  if (!where.ok()) return std::nullopt;
  auto format = layout::DetectFormat(*where->store, where->prefix);
  if (!format.ok() || *format == "orbax") return std::nullopt;
  return layout::OpenCheckpoint(where->store, where->prefix, *format);
}

// The tiers of an emergency run (emergency/tier_info.h) when `loc` is one's
// local directory or persistent root; nullopt otherwise.
inline std::optional<Json> DescribeEmergencyTiers(const orbax::Location& loc) {
  auto described = emergency::DescribeEmergencyDirectory(loc);
  if (!described.ok() || !*described) return std::nullopt;
  return std::move(**described);
}

inline int PrintEmergencyTiers(const Json& tiers, bool json) {
  if (json) {
    std::printf("%s\n", DumpJson(tiers).c_str());
    return 0;
  }
  auto line = [](const char* label, const Json& j) {
    if (!j.is_null()) std::printf("%s: %s\n", label, DumpJson(j).c_str());
  };
  std::printf("emergency run: %s tier\n", tiers.value("kind", "").c_str());
  if (tiers.contains("process_index")) {
    std::printf("process: %s of %s, %s replicas\n", DumpJson(tiers["process_index"]).c_str(),
                DumpJson(tiers["process_count"]).c_str(), DumpJson(tiers.value("num_replicas", Json())).c_str());
  }
  line("local steps", tiers.value("local_steps", Json()));
  line("peer steps (by owner)", tiers.value("peer_steps", Json()));
  line("uncommitted", tiers.value("uncommitted", Json()));
  if (tiers.contains("persistent_directory")) {
    std::printf("persistent directory: %s\n", tiers["persistent_directory"].get<std::string>().c_str());
  }
  line("persistent steps", tiers.value("persistent_steps", Json()));
  if (tiers.contains("local_directories")) {
    for (const auto& [process, entry] : tiers["local_directories"].items()) {
      std::printf("process %s local directory %s: local steps %s, peer steps %s\n", process.c_str(),
                  entry.value("local_directory", "").c_str(), DumpJson(entry.value("local_steps", Json())).c_str(),
                  DumpJson(entry.value("peer_steps", Json())).c_str());
    }
  }
  return 0;
}

}  // namespace cairn::cli
