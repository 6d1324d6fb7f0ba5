// What the tiers of an emergency run hold, for `cairn info`: from a local
// directory, its own local steps, the peer copies it keeps (by owner) and
// the steps of the persistent tier it was last opened with; from a
// persistent root, its steps and the local directories of the processes
// that opened it (and what each holds, where readable from here).
//
// The manager leaves two small records for this when it opens
// (WriteRunRecords): `<local>/cairn_emergency.json` {"persistent_directory",
// "process_index", "process_count", "num_replicas"} and
// `<persistent>/cairn_emergency/process_<i>.json` {"local_directory"}.
// Orbax ignores both (neither is named like a step).
#pragma once

#include <optional>
#include <string>

#include "cairn/layout/orbax/location.h"
#include "cairn/util/json.h"
#include "cairn/result.h"

namespace cairn::emergency {

inline constexpr std::string_view kRunRecordFile = "cairn_emergency.json";
inline constexpr std::string_view kPersistentRunDir = "cairn_emergency";

Status WriteRunRecords(const orbax::Location& local, const std::string& local_path, const orbax::Location& persistent,
                       const std::string& persistent_path, int process_index, int process_count, int num_replicas);

// nullopt when `dir` is neither a local directory nor a persistent root of
// an emergency run. Otherwise {"kind": "local"|"persistent", "local_steps",
// "uncommitted", "peer_steps": {"<owner>": [...]}, "persistent_directory",
// "persistent_steps", "local_directories": {"<process>": {...}}}.
Result<std::optional<Json>> DescribeEmergencyDirectory(const orbax::Location& dir);

}  // namespace cairn::emergency
