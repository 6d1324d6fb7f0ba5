#include "cairn/emergency/tier_info.h"

#include <algorithm>

#include "cairn/emergency/local_step.h"
#include "cairn/layout/orbax/step.h"

namespace cairn::emergency {
namespace {

Result<std::optional<Json>> ReadJson(const orbax::Location& loc, std::string_view name) {
  CAIRN_ASSIGN_OR_RETURN(std::optional<Buffer> bytes, loc.store->Get(loc.Key(name)));
  if (!bytes) return std::optional<Json>();
  CAIRN_ASSIGN_OR_RETURN(Json j, ParseJson(std::string_view(reinterpret_cast<const char*>(bytes->data()), bytes->size()),
                                           loc.Child(std::string(name)).Path()));
  return std::optional<Json>(std::move(j));
}

Json StepsOf(const orbax::Location& root) {
  Json out = Json::array();
  auto steps = orbax::ListSteps(root, orbax::StepNameFormat{});
  if (steps.ok()) {
    for (const orbax::StepInfo& s : *steps) out.push_back(s.step);
  }
  return out;
}

// Own steps, unfinished ones and peer copies of a local directory.
void DescribeLocal(const orbax::Location& local, Json& out) {
  Json own = Json::array(), uncommitted = Json::array(), peers = Json::object();
  auto held = ListHoldings(local);
  if (held.ok()) {
    for (const Holding& h : *held) {
      if (h.kind == Holding::Kind::kOwn) own.push_back(h.record.step);
      else peers[std::to_string(h.record.process_index)].push_back(h.record.step);
    }
  }
  auto entries = orbax::ListEntries(local);
  if (entries.ok()) {
    for (const ChildEntry& e : *entries) {
      if (e.name.find(".orbax-checkpoint-tmp") != std::string::npos) uncommitted.push_back(e.name);
    }
  }
  out["local_steps"] = std::move(own);
  out["uncommitted"] = std::move(uncommitted);
  out["peer_steps"] = std::move(peers);
}

}  // namespace

Status WriteRunRecords(const orbax::Location& local, const std::string& local_path, const orbax::Location& persistent,
                       const std::string& persistent_path, int process_index, int process_count, int num_replicas) {
  const Json mine = {{"persistent_directory", persistent_path},
                     {"process_index", process_index},
                     {"process_count", process_count},
                     {"num_replicas", num_replicas}};
  CAIRN_RETURN_IF_ERROR(local.store->Put(local.Key(kRunRecordFile), AsBytes(DumpJson(mine))));
  const Json where = {{"local_directory", local_path}};
  return persistent.store->Put(
      persistent.Child(std::string(kPersistentRunDir)).Key("process_" + std::to_string(process_index) + ".json"),
      AsBytes(DumpJson(where)));
}

Result<std::optional<Json>> DescribeEmergencyDirectory(const orbax::Location& dir) {
  CAIRN_ASSIGN_OR_RETURN(std::optional<Json> record, ReadJson(dir, kRunRecordFile));
  Json out;
  if (record) {
    out["kind"] = "local";
    DescribeLocal(dir, out);
    auto persistent_path = GetStringField(*record, "persistent_directory");
    if (persistent_path.ok()) {
      out["persistent_directory"] = *persistent_path;
      auto persistent = orbax::OpenLocation(*persistent_path);
      if (persistent.ok()) out["persistent_steps"] = StepsOf(*persistent);
    }
    for (const char* f : {"process_index", "process_count", "num_replicas"}) {
      if (const Json* v = FindField(*record, f)) out[f] = *v;
    }
    return std::optional<Json>(std::move(out));
  }
  const orbax::Location runs = dir.Child(std::string(kPersistentRunDir));
  CAIRN_ASSIGN_OR_RETURN(std::vector<KeyInfo> listed, runs.store->List(runs.prefix));
  if (listed.empty()) return std::optional<Json>();
  out["kind"] = "persistent";
  out["persistent_steps"] = StepsOf(dir);
  Json locals = Json::object();
  for (const KeyInfo& k : listed) {
    const std::string name = k.key.substr(runs.prefix.size());
    if (name.rfind("process_", 0) != 0 || name.size() <= 13) continue;
    const std::string process = name.substr(8, name.size() - 13);  // process_<i>.json
    auto j = ReadJson(runs, name);
    if (!j.ok() || !*j) continue;
    auto path = GetStringField(**j, "local_directory");
    if (!path.ok()) continue;
    Json entry = {{"local_directory", *path}};
    auto local = orbax::OpenLocation(*path);
    if (local.ok() && orbax::Exists(*local)) DescribeLocal(*local, entry);
    else entry["reachable"] = false;
    locals[process] = std::move(entry);
  }
  out["local_directories"] = std::move(locals);
  return std::optional<Json>(std::move(out));
}

}  // namespace cairn::emergency
