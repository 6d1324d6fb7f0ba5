#include "cairn/emergency/local_step.h"

#include "cairn/emergency/orbax_local_step.h"
#include "cairn/layout/orbax/metadata_files.h"
#include "cairn/layout/orbax/step.h"

namespace cairn::emergency {
namespace {

constexpr std::string_view kFormat = "cairn.emergency.local_step";
constexpr size_t kMaxBoxesPerArray = size_t{1} << 20;

Json BoxToJson(const Box& b) { return Json::array({Json(b.origin), Json(b.shape)}); }

Result<Box> BoxFromJson(const Json& j, size_t rank, const std::string& what) {
  if (!j.is_array() || j.size() != 2) return InvalidArgumentError(what + ": a box is [origin, shape]");
  CAIRN_ASSIGN_OR_RETURN(auto origin, JsonToIntVector(j[0], what + " origin"));
  CAIRN_ASSIGN_OR_RETURN(auto shape, JsonToIntVector(j[1], what + " shape"));
  if (origin.size() != rank || shape.size() != rank) {
    return InvalidArgumentError(what + ": box rank differs from the array's rank " + std::to_string(rank));
  }
  for (Index n : shape) {
    if (n < 0) return InvalidArgumentError(what + ": negative box extent");
  }
  return Box(std::move(origin), std::move(shape));
}

Result<int> SmallInt(const Json& obj, std::string_view field, int lo, const std::string& what) {
  CAIRN_ASSIGN_OR_RETURN(int64_t v, GetIntField(obj, field));
  if (v < lo || v > (int64_t{1} << 30)) {
    return InvalidArgumentError(what + ": `" + std::string(field) + "` out of range");
  }
  return static_cast<int>(v);
}

}  // namespace

Json LocalStepRecordToJson(const LocalStepRecord& r) {
  Json arrays = Json::object();
  for (const auto& [param, a] : r.arrays) {
    Json boxes = Json::array();
    for (const Box& b : a.boxes) boxes.push_back(BoxToJson(b));
    arrays[param] = {{"dtype", a.dtype}, {"shape", a.shape}, {"boxes", std::move(boxes)}};
  }
  return {{"format", kFormat},         {"version", 1},
          {"step", r.step},            {"process_index", r.process_index},
          {"process_count", r.process_count}, {"num_replicas", r.num_replicas},
          {"arrays", std::move(arrays)}};
}

Result<LocalStepRecord> LocalStepRecordFromJson(const Json& j, std::string_view what_view) {
  const std::string what(what_view);
  if (!j.is_object()) return InvalidArgumentError(what + ": not a JSON object");
  CAIRN_ASSIGN_OR_RETURN(std::string format, GetStringField(j, "format"));
  if (format != kFormat) return InvalidArgumentError(what + ": format `" + format + "` is not " + std::string(kFormat));
  LocalStepRecord r;
  CAIRN_ASSIGN_OR_RETURN(r.step, GetIntField(j, "step"));
  CAIRN_ASSIGN_OR_RETURN(r.process_count, SmallInt(j, "process_count", 1, what));
  CAIRN_ASSIGN_OR_RETURN(r.process_index, SmallInt(j, "process_index", 0, what));
  CAIRN_ASSIGN_OR_RETURN(r.num_replicas, SmallInt(j, "num_replicas", 1, what));
  if (r.process_index >= r.process_count || r.step < 0) {
    return InvalidArgumentError(what + ": process index or step out of range");
  }
  CAIRN_ASSIGN_OR_RETURN(const Json* arrays, GetField(j, "arrays"));
  if (!arrays->is_object()) return InvalidArgumentError(what + ": `arrays` is not an object");
  for (const auto& [param, a] : arrays->items()) {
    const std::string where = what + " array `" + param + "`";
    if (!a.is_object()) return InvalidArgumentError(where + ": not an object");
    StoredArray out;
    CAIRN_ASSIGN_OR_RETURN(out.dtype, GetStringField(a, "dtype"));
    CAIRN_ASSIGN_OR_RETURN(const Json* shape, GetField(a, "shape"));
    CAIRN_ASSIGN_OR_RETURN(out.shape, JsonToIntVector(*shape, where + " shape"));
    for (Index n : out.shape) {
      if (n < 0) return InvalidArgumentError(where + ": negative extent");
    }
    CAIRN_ASSIGN_OR_RETURN(const Json* boxes, GetField(a, "boxes"));
    if (!boxes->is_array() || boxes->size() > kMaxBoxesPerArray) {
      return InvalidArgumentError(where + ": `boxes` is not a list of at most 2^20 boxes");
    }
    for (const Json& b : *boxes) {
      CAIRN_ASSIGN_OR_RETURN(Box box, BoxFromJson(b, out.shape.size(), where));
      if (!Box::FromShape(out.shape).Contains(box)) {
        return InvalidArgumentError(where + ": box " + box.ToString() + " lies outside the array");
      }
      out.boxes.push_back(std::move(box));
    }
    r.arrays.emplace(param, std::move(out));
  }
  return r;
}

orbax::Location PeerCopyLocation(const orbax::Location& local, int owner, int64_t step) {
  return local.Child(kPeerCopiesDir).Child("process_" + std::to_string(owner)).Child(std::to_string(step));
}

orbax::Location HoldingLocation(const orbax::Location& local, const Holding& h) {
  if (h.kind == Holding::Kind::kOwn) return local.Child(std::to_string(h.record.step));
  return PeerCopyLocation(local, h.record.process_index, h.record.step);
}

namespace {

// The finalized steps directly below `dir` whose record reads.
Status CollectSteps(const orbax::Location& dir, Holding::Kind kind, std::vector<Holding>& out) {
  auto steps = orbax::ListSteps(dir, orbax::StepNameFormat{}, /*require_commit_file=*/true);
  if (!steps.ok()) {
    if (steps.status().code() == StatusCode::kNotFound) return Status::OK();
    return steps.status();
  }
  for (const orbax::StepInfo& s : *steps) {
    auto text = orbax::ReadSmallFile(s.location, kLocalStepRecord, uint64_t{64} << 20);
    Result<LocalStepRecord> record = NotFoundError("no record");
    if (text.ok()) {
      auto json = ParseJson(*text, s.path());
      if (json.ok()) record = LocalStepRecordFromJson(*json, s.path() + "/" + std::string(kLocalStepRecord));
    } else if (text.status().code() == StatusCode::kNotFound) {
      // No record: a step Orbax's emergency manager wrote, if its files say so.
      record = RecordFromOrbaxLocalStep(s.location, s.step);
    }
    if (!record.ok() || record->step != s.step) continue;  // unreadable: not held
    Holding h;
    h.kind = kind;
    h.record = std::move(*record);
    out.push_back(std::move(h));
  }
  return Status::OK();
}

}  // namespace

Result<std::vector<Holding>> ListHoldings(const orbax::Location& local) {
  std::vector<Holding> out;
  CAIRN_RETURN_IF_ERROR(CollectSteps(local, Holding::Kind::kOwn, out));
  const orbax::Location peers = local.Child(kPeerCopiesDir);
  auto owners = orbax::ListEntries(peers);
  if (owners.ok()) {
    for (const ChildEntry& e : *owners) {
      if (e.kind != ChildEntry::Kind::kPrefix || e.name.rfind("process_", 0) != 0) continue;
      std::vector<Holding> copies;
      CAIRN_RETURN_IF_ERROR(CollectSteps(peers.Child(e.name), Holding::Kind::kPeerCopy, copies));
      for (Holding& h : copies) {
        // A copy must sit under its owner's name.
        if (e.name == "process_" + std::to_string(h.record.process_index)) out.push_back(std::move(h));
      }
    }
  }
  return out;
}

std::string EncodeHoldings(const std::vector<Holding>& holdings) {
  Json list = Json::array();
  for (const Holding& h : holdings) {
    list.push_back({{"kind", h.kind == Holding::Kind::kOwn ? "own" : "peer"},
                    {"record", LocalStepRecordToJson(h.record)}});
  }
  return DumpJson(list);
}

Result<std::vector<Holding>> DecodeHoldings(std::string_view bytes, int holder) {
  const std::string what = "the local steps process " + std::to_string(holder) + " holds";
  CAIRN_ASSIGN_OR_RETURN(Json j, ParseJson(bytes, what));
  if (!j.is_array()) return InvalidArgumentError(what + ": not a list");
  std::vector<Holding> out;
  for (const Json& e : j) {
    if (!e.is_object()) return InvalidArgumentError(what + ": an entry is not an object");
    Holding h;
    h.holder = holder;
    CAIRN_ASSIGN_OR_RETURN(std::string kind, GetStringField(e, "kind"));
    h.kind = kind == "own" ? Holding::Kind::kOwn : Holding::Kind::kPeerCopy;
    CAIRN_ASSIGN_OR_RETURN(const Json* record, GetField(e, "record"));
    CAIRN_ASSIGN_OR_RETURN(h.record, LocalStepRecordFromJson(*record, what));
    out.push_back(std::move(h));
  }
  return out;
}

}  // namespace cairn::emergency
