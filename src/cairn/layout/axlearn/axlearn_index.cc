#include "cairn/layout/axlearn/axlearn_index.h"

#include <cstdio>
#include <unordered_map>

#include "cairn/layout/orbax/py_json.h"

namespace cairn::axlearn {
namespace {

Status Corrupt(std::string_view what, std::string detail) {
  return Status(StatusCode::kDataLoss, "AXLearn index " + std::string(what) + ": " + detail);
}

}  // namespace

Result<Shape> ParseTupleShape(std::string_view text) {
  auto bad = [&] {
    return Status(StatusCode::kInvalidArgument,
                  "shape `" + std::string(text) + "` is not a tuple of dimensions like (8, 4)");
  };
  if (text.size() < 2 || text.front() != '(' || text.back() != ')') return bad();
  std::string_view body = text.substr(1, text.size() - 2);
  Shape shape;
  size_t i = 0;
  while (i < body.size()) {
    while (i < body.size() && body[i] == ' ') ++i;
    if (i == body.size()) break;
    size_t start = i;
    Index v = 0;
    while (i < body.size() && body[i] >= '0' && body[i] <= '9') {
      if (v > (INT64_MAX - 9) / 10) return bad();
      v = v * 10 + (body[i] - '0');
      ++i;
    }
    if (i == start) return bad();
    shape.push_back(v);
    while (i < body.size() && body[i] == ' ') ++i;
    if (i < body.size()) {
      if (body[i] != ',') return bad();
      ++i;
    }
  }
  if (shape.size() > 64) return bad();
  return shape;
}

std::string FormatTupleShape(const Shape& shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (shape.size() == 1) s += ",";
  return s + ")";
}

Result<StepIndex> ParseIndex(std::string_view text, std::string_view what) {
  if (text.size() > kMaxIndexBytes) return Corrupt(what, "larger than the 64 MiB limit");
  auto json = ParseJson(text, "AXLearn index");
  if (!json.ok()) return Corrupt(what, std::string(json.status().message()));
  if (!json->is_array()) return Corrupt(what, "not a JSON list");
  StepIndex index;
  bool have_step = false;
  // Entry of each path: AXLearn writes a dict, so a path appears once.
  std::unordered_map<std::string, size_t> seen;
  for (size_t i = 0; i < json->size(); ++i) {
    const Json& pair = (*json)[i];
    if (!pair.is_array() || pair.size() != 2 || !pair[0].is_string()) {
      return Corrupt(what, "entry " + std::to_string(i) + " is not a [path, value] pair");
    }
    IndexEntry e;
    e.path = pair[0].get<std::string>();
    const Json& v = pair[1];
    // The first "step" is the step number; a tree may hold a leaf named
    // "step" too (AXLearn lists the step before the tree's leaves).
    if (e.path != "step" || have_step) {
      if (auto [it, fresh] = seen.emplace(e.path, i); !fresh) {
        return Corrupt(what, "entry " + std::to_string(i) + ": path `" + e.path + "` is already entry " +
                                 std::to_string(it->second) + " (a path appears once)");
      }
    }
    if (e.path == "step" && !have_step) {
      auto step = JsonToInt(v, "step");
      if (!step.ok() || *step < 0) return Corrupt(what, "`step` is not a non-negative integer");
      index.step = *step;
      have_step = true;
      continue;
    }
    const Json* dtype = v.is_object() ? FindField(v, "dtype") : nullptr;
    const Json* shape = v.is_object() ? FindField(v, "shape") : nullptr;
    if (v.is_object() && v.size() == 2 && dtype && shape && dtype->is_string() &&
        shape->is_string()) {
      auto d = ParseDTypeName(dtype->get<std::string>());
      if (!d.ok()) return Corrupt(what, "tensor `" + e.path + "`: " + std::string(d.status().message()));
      auto s = ParseTupleShape(shape->get<std::string>());
      if (!s.ok()) return Corrupt(what, "tensor `" + e.path + "`: " + std::string(s.status().message()));
      e.is_tensor = true;
      e.dtype = *d;
      e.shape = std::move(*s);
    } else {
      e.value = v;
    }
    index.entries.push_back(std::move(e));
  }
  if (!have_step) return Corrupt(what, "no `step` entry");
  return index;
}

std::string FormatIndex(const StepIndex& index) {
  std::string out = "[[\"step\", " + std::to_string(index.step) + "]";
  for (const IndexEntry& e : index.entries) {
    out += ", [" + orbax::PyJsonString(e.path) + ", ";
    if (e.is_tensor) {
      out += "{\"dtype\": " + orbax::PyJsonString(DTypeName(e.dtype)) +
             ", \"shape\": " + orbax::PyJsonString(FormatTupleShape(e.shape)) + "}";
    } else {
      out += orbax::PyJsonDumps(e.value);
    }
    out += "]";
  }
  return out + "]";
}

std::string StepDirName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld", static_cast<long long>(step));
  return buf;
}

}  // namespace cairn::axlearn
