// Opening a checkpoint of any format cairn reads, by looking at what is
// stored (format detection), as a CheckpointReader.
//
//   safetensors  a key ending in ".safetensors", a `model.safetensors.index.json`,
//                or a prefix holding `*.safetensors` files
//   axlearn      a step holding `index` (AXLearn's regular layout), or a
//                directory of `step_XXXXXXXX/` steps (the latest committed,
//                or `step`)
//   orbax        an Orbax item, step or root (the latest finalized step);
//                AXLearn's Orbax steps (`state/` beside `index/index`) too
//
// Thread safety: functions may be called concurrently.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "cairn/kvstore/kvstore.h"
#include "cairn/layout/axlearn/axlearn_index.h"
#include "cairn/layout/checkpoint_format.h"

namespace cairn::layout {

struct OpenedCheckpoint {
  std::unique_ptr<CheckpointReader> reader;
  std::string format;          // "safetensors", "axlearn", "orbax"
  std::string location;        // the step / item / file actually opened
  std::optional<int64_t> step;  // when the format knows it
  // A safetensors source's `__metadata__` (its files' entries merged).
  std::map<std::string, std::string> metadata;
  // AXLearn's index of the step (regular layout, or `index/index` of an
  // AXLearn Orbax step), for carrying non-tensor entries to AXLearn.
  std::optional<axlearn::StepIndex> axlearn_index;
  // Input-iterator state beside the arrays (AXLearn's `tf_<pid>/` and
  // `python_<pid>/`, or `tfds/tf_<pid>/` and `python/python_<pid>/` in its
  // Orbax steps): {key in the store, path relative to an AXLearn step}.
  std::vector<std::pair<std::string, std::string>> iterator_files;
};

// `format` is "" (detect) or one of the names above. NotFound says what was
// looked for at `location`; InvalidArgument for an unknown format.
Result<OpenedCheckpoint> OpenCheckpoint(std::shared_ptr<KvStore> store, std::string location,
                                        std::string_view format = "",
                                        std::optional<int64_t> step = std::nullopt);

// The format at `location` by what is stored, as OpenCheckpoint detects it,
// without opening (so without validating) it: "safetensors", "axlearn", or
// "orbax" for anything else (which may be no checkpoint at all).
Result<std::string> DetectFormat(KvStore& store, const std::string& location);

// The AXLearn step directories (`step_XXXXXXXX/`) under `prefix` that hold
// an `index`, by step number.
Result<std::vector<int64_t>> ListAxlearnSteps(KvStore& store, const std::string& prefix);

}  // namespace cairn::layout
