// Reading a local step that Orbax's emergency CheckpointManager wrote (it
// has no cairn_local_step.json): the record (local_step.h) is rebuilt from
// the files Orbax leaves in the step, so that cairn's restore can choose,
// fetch and read such steps like its own.
//
// What is read from `<local>/<step>/`:
//   - `state/ocdbt.process_<p>/`: the owner p (the one process whose
//     database the step holds; Orbax writes only its own);
//   - `process_metadata/global_process_metadata.json`: the device ids each
//     process had when saving ([[ids of process 0], [.. of 1], ...]); its
//     length is the job's process count;
//   - `state/_sharding`: each array's NamedSharding at save time (mesh
//     shape, axis names, partition spec and the mesh's device ids);
//   - each array's zarr metadata (through the item's OCDBT root): dtype and
//     shape.
// The boxes of process p are those of its devices: a device's position in
// the mesh gives, for every array dimension split over mesh axes, the index
// of its block (blocks of ceil(extent / ways), the last one clipped, as jax
// splits). The replica count is the mesh's first axis (Orbax's default
// replica axis), or 1 when it does not divide the process count.
//
// Thread safety: reads of the store only.
#pragma once

#include <cstdint>

#include "cairn/emergency/local_step.h"
#include "cairn/layout/orbax/location.h"

namespace cairn::emergency {

// The record of the Orbax local step at `step_dir` (holding `step`).
// NotFound when it is not an Orbax local step (no process metadata or no
// per-process database); InvalidArgument / DataLoss naming the file for
// malformed or inconsistent metadata (a sharding cairn cannot place, an
// owner outside the process list, device ids the mesh lacks).
Result<LocalStepRecord> RecordFromOrbaxLocalStep(const orbax::Location& step_dir, int64_t step);

// The boxes `device_ids` hold of an array of `shape` placed by the sharding
// JSON `sharding` (as Orbax writes into `_sharding`); `what` names it in
// errors. Exposed for tests.
Result<std::vector<Box>> BoxesOfDevices(std::string_view sharding, const Shape& shape,
                                        const std::vector<int64_t>& device_ids, const std::string& what);

}  // namespace cairn::emergency
