// The checkpoints `cairn ls/info/verify` read through the checkpoint-format
// interface (layout/checkpoint_format.h) rather than the Orbax inspector:
// AXLearn steps and roots, safetensors files and sets.
#pragma once

#include <optional>
#include <string>

#include "cairn/engine/convert/convert_checkpoint.h"
#include "cairn/layout/open_checkpoint.h"

namespace cairn::cli {

// The AXLearn or safetensors checkpoint at `path_or_url`; nullopt when
// there is none there (or it is an Orbax checkpoint, or a zarr pipeline URL).
inline std::optional<layout::OpenedCheckpoint> OpenOtherFormat(const std::string& path_or_url) {
  if (path_or_url.find('|') != std::string::npos) return std::nullopt;
  auto where = engine::OpenUserLocation(path_or_url);
  if (!where.ok()) return std::nullopt;
  auto opened = layout::OpenCheckpoint(where->store, where->prefix);
  if (!opened.ok() || opened->format == "orbax") return std::nullopt;
  return std::move(*opened);
}

}  // namespace cairn::cli
