// include/cairn/inspect.h, `info`: describing a checkpoint of any format,
// and the tiers of an emergency run.
#include <optional>
#include <string>

#include "cairn/api/inspect_common.h"
#include "cairn/dtype/dtype.h"
#include "cairn/emergency/tier_info.h"
#include "cairn/inspect.h"
#include "cairn/layout/inspect/checkpoint.h"
#include "cairn/layout/orbax/location.h"

namespace cairn {
namespace {

// The variant of the first readable PyTree item ("" when none); "mixed"
// when items differ.
std::string VariantOf(const inspect::CheckpointInfo& info) {
  std::string variant;
  for (const inspect::ItemInfo& item : info.items) {
    if (item.variant.empty()) continue;
    if (variant.empty()) variant = item.variant;
    else if (variant != item.variant) return "mixed";
  }
  return variant;
}

CheckpointDescription DescribeOtherFormat(const layout::OpenedCheckpoint& opened) {
  CheckpointDescription d;
  d.path = opened.location;
  d.format = opened.format;
  d.step = opened.step;
  d.arrays = opened.reader->arrays().size();
  for (const layout::ArrayInfo& a : opened.reader->arrays()) {
    d.bytes += NumElements(a.shape) * DTypeSize(a.dtype);
    d.stored_bytes += a.stored_bytes;
  }
  d.iterator_files = opened.iterator_files.size();
  return d;
}

CheckpointDescription DescribeOrbax(const inspect::CheckpointInfo& info) {
  CheckpointDescription d;
  d.path = info.path;
  d.format = "orbax";
  d.variant = VariantOf(info);
  d.kind = inspect::CheckpointKindName(info.kind);
  for (const inspect::StepEntry& s : info.steps) d.steps.push_back(StepListing{s.name, s.step, s.finalized});
  d.root_metadata = api::JsonLine(info.root_metadata);
  d.step_dir = info.step_dir;
  d.step_metadata = api::JsonLine(info.step_metadata);
  if (info.step_metadata.is_object()) {
    if (auto it = info.step_metadata.find("custom_metadata"); it != info.step_metadata.end()) {
      d.step_custom_metadata = api::JsonLine(*it);
    }
  }
  for (const inspect::ItemInfo& item : info.items) {
    ItemDescription i;
    i.name = item.name;
    i.dir = item.dir;
    i.handler = item.handler;
    i.is_pytree = item.is_pytree;
    i.variant = item.variant;
    i.custom_metadata = api::JsonLine(item.custom_metadata);
    for (const inspect::ArrayEntry& a : item.arrays) i.arrays.push_back(api::ToListing(a));
    i.total_bytes = item.total_bytes;
    i.error = item.error;
    d.items.push_back(std::move(i));
  }
  return d;
}

Json OrbaxJson(const CheckpointDescription& d) {
  Json items = Json::array();
  for (const ItemDescription& it : d.items) {
    Json arrays = Json::array();
    for (const ArrayListing& a : it.arrays) arrays.push_back(api::RowJson(a));
    Json j = {{"name", it.name},
              {"dir", it.dir},
              {"handler", it.handler},
              {"pytree", it.is_pytree},
              {"variant", it.variant},
              {"custom_metadata", api::FromJsonLine(it.custom_metadata)},
              {"num_arrays", it.arrays.size()},
              {"total_bytes", it.total_bytes},
              {"arrays", arrays}};
    if (!it.error.empty()) j["error"] = it.error;
    items.push_back(std::move(j));
  }
  Json j = {{"path", d.path}, {"kind", d.kind}, {"items", items}, {"format", d.variant}};
  if (d.kind == "root") {
    Json steps = Json::array();
    for (const StepListing& s : d.steps) {
      steps.push_back({{"name", s.name}, {"step", s.step ? Json(*s.step) : Json(nullptr)},
                       {"finalized", s.finalized}});
    }
    j["steps"] = steps;
    j["root_metadata"] = api::FromJsonLine(d.root_metadata);
  }
  if (!d.step_dir.empty()) {
    j["step_dir"] = d.step_dir;
    j["step_metadata"] = api::FromJsonLine(d.step_metadata);
  }
  return j;
}

// A field of the tiers as JSON text; "" when absent.
std::string FieldText(const Json& j, const char* field) {
  auto it = j.find(field);
  return it == j.end() ? "" : api::JsonLine(*it);
}

EmergencyRunDescription ToDescription(const Json& tiers) {
  EmergencyRunDescription d;
  d.kind = tiers.value("kind", "");
  d.process_index = FieldText(tiers, "process_index");
  d.process_count = FieldText(tiers, "process_count");
  d.num_replicas = FieldText(tiers, "num_replicas");
  d.local_steps = FieldText(tiers, "local_steps");
  d.uncommitted = FieldText(tiers, "uncommitted");
  d.peer_steps = FieldText(tiers, "peer_steps");
  if (auto it = tiers.find("persistent_directory"); it != tiers.end() && it->is_string()) {
    d.persistent_directory = it->get<std::string>();
  }
  d.persistent_steps = FieldText(tiers, "persistent_steps");
  if (auto it = tiers.find("local_directories"); it != tiers.end() && it->is_object()) {
    for (const auto& [process, entry] : it->items()) {
      d.local_directories.push_back({process, entry.value("local_directory", ""),
                                     api::JsonLine(entry.value("local_steps", Json())),
                                     api::JsonLine(entry.value("peer_steps", Json()))});
    }
  }
  d.json = api::JsonLine(tiers);
  return d;
}

}  // namespace

bool CheckpointDescription::ok() const {
  for (const ItemDescription& item : items) {
    if (!item.error.empty()) return false;
  }
  return true;
}

Result<CheckpointDescription> DescribeCheckpoint(const std::string& address) {
  CAIRN_RETURN_IF_ERROR(api::CheckExists(address));
  if (auto other = api::OpenOtherFormat(address)) {
    if (!other->ok()) return other->status();
    return DescribeOtherFormat(**other);
  }
  auto loc = orbax::OpenLocation(address);
  if (!loc.ok()) return api::NoCheckpoint(address, loc.status());
  auto info = inspect::DescribeCheckpoint(*loc);
  if (!info.ok()) return api::NoCheckpoint(address, info.status());
  return DescribeOrbax(*info);
}

std::string ToJson(const CheckpointDescription& d) {
  if (d.format == "orbax") return api::JsonLine(OrbaxJson(d));
  Json j = {{"path", d.path}, {"format", d.format}, {"arrays", d.arrays}, {"bytes", d.bytes},
            {"iterator_files", d.iterator_files}};
  if (d.step) j["step"] = *d.step;
  if (d.stored_bytes > 0) j["stored_bytes"] = d.stored_bytes;
  return api::JsonLine(j);
}

Result<std::optional<EmergencyRunDescription>> DescribeEmergencyRun(const std::string& address) {
  if (api::OpenOtherFormat(address)) return std::optional<EmergencyRunDescription>();
  auto loc = orbax::OpenLocation(address);
  if (!loc.ok()) return std::optional<EmergencyRunDescription>();
  CAIRN_ASSIGN_OR_RETURN(std::optional<Json> tiers, emergency::DescribeEmergencyDirectory(*loc));
  if (!tiers) return std::optional<EmergencyRunDescription>();
  return std::optional<EmergencyRunDescription>(ToDescription(*tiers));
}

}  // namespace cairn
