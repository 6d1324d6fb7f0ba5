// Reads safetensors checkpoints through a KvStore: one file, or a sharded set
// (`model.safetensors.index.json` naming the file of every tensor, as Hugging
// Face writes it), or every `*.safetensors` file directly under a prefix.
//
// Only headers are read when opening; ReadBox reads just the byte ranges the
// box covers (one ranged read when the box is contiguous or dense enough,
// one per contiguous run otherwise), never a whole file.
//
// Thread safety: ReadBox may be called concurrently.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "cairn/kvstore/kvstore.h"
#include "cairn/layout/checkpoint_format.h"

namespace cairn::safetensors {

inline constexpr std::string_view kIndexFile = "model.safetensors.index.json";
inline constexpr std::string_view kFileSuffix = ".safetensors";
// An index file larger than this is refused (real ones are a few MB).
inline constexpr uint64_t kMaxIndexBytes = 64 << 20;

// `location` is a key ending in ".safetensors" (one file), a key ending in
// ".index.json", or a prefix ("" or ending in "/") holding the index file or
// the files. Errors name the key and the store's URL.
// `metadata` (may be null) receives the files' `__metadata__` entries (for
// a key in several files, the first file's value, in the order of their
// names).
Result<std::unique_ptr<layout::CheckpointReader>> OpenReader(
    std::shared_ptr<KvStore> store, std::string location,
    std::map<std::string, std::string>* metadata = nullptr);

}  // namespace cairn::safetensors
