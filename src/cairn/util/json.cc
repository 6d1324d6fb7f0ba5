#include "cairn/util/json.h"

namespace cairn {

namespace {

// True if `text`, read as JSON, nests arrays/objects deeper than `limit`.
// One pass that only tells strings from structure: exact for valid JSON,
// and on invalid JSON it agrees with the parser up to the point where the
// parser stops. (nlohmann's parser callback could refuse deep containers,
// but its DOM builder rescans the parent at every container's end, which
// is quadratic for a long array of objects.)
bool NestsDeeperThan(std::string_view text, int limit) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return false;
}

}  // namespace

Result<Json> ParseJson(std::string_view text, std::string_view what) {
  if (NestsDeeperThan(text, kMaxJsonDepth)) {
    return InvalidArgumentError(std::string(what) + ": JSON nested deeper than " +
                                std::to_string(kMaxJsonDepth) + " levels");
  }
  // nlohmann's parser keeps its state on the heap and frees values
  // iteratively; only the scan above bounds what later code recurses over.
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return InvalidArgumentError(std::string(what) + ": not valid JSON");
  }
  return j;
}

std::string DumpJson(const Json& j) {
  // Replace invalid UTF-8 rather than throw.
  return j.dump(-1, ' ', false, Json::error_handler_t::replace);
}

const Json* FindField(const Json& obj, std::string_view field) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(field);
  if (it == obj.end()) return nullptr;
  return &*it;
}

Result<const Json*> GetField(const Json& obj, std::string_view field) {
  if (!obj.is_object()) return InvalidArgumentError("expected a JSON object");
  const Json* f = FindField(obj, field);
  if (f == nullptr) return InvalidArgumentError("missing member \"" + std::string(field) + "\"");
  return f;
}

Result<int64_t> JsonToInt(const Json& j, std::string_view what) {
  if (j.is_number_integer()) {
    if (j.is_number_unsigned() && j.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return InvalidArgumentError(std::string(what) + ": integer out of range");
    }
    return j.get<int64_t>();
  }
  return InvalidArgumentError(std::string(what) + ": expected an integer, got " + DumpJson(j));
}

Result<uint64_t> JsonToUInt(const Json& j, std::string_view what) {
  if (j.is_number_unsigned()) return j.get<uint64_t>();
  if (j.is_number_integer() && j.get<int64_t>() >= 0) return static_cast<uint64_t>(j.get<int64_t>());
  return InvalidArgumentError(std::string(what) + ": expected a non-negative integer, got " +
                              DumpJson(j));
}

Result<std::string> JsonToString(const Json& j, std::string_view what) {
  if (j.is_string()) return j.get<std::string>();
  return InvalidArgumentError(std::string(what) + ": expected a string, got " + DumpJson(j));
}

Result<bool> JsonToBool(const Json& j, std::string_view what) {
  if (j.is_boolean()) return j.get<bool>();
  return InvalidArgumentError(std::string(what) + ": expected a boolean, got " + DumpJson(j));
}

Result<std::vector<int64_t>> JsonToIntVector(const Json& j, std::string_view what) {
  if (!j.is_array()) {
    return InvalidArgumentError(std::string(what) + ": expected an array, got " + DumpJson(j));
  }
  std::vector<int64_t> v;
  v.reserve(j.size());
  for (const auto& e : j) {
    CAIRN_ASSIGN_OR_RETURN(int64_t x, JsonToInt(e, what));
    v.push_back(x);
  }
  return v;
}

Result<int64_t> GetIntField(const Json& obj, std::string_view field) {
  CAIRN_ASSIGN_OR_RETURN(const Json* f, GetField(obj, field));
  return JsonToInt(*f, field);
}

Result<std::string> GetStringField(const Json& obj, std::string_view field) {
  CAIRN_ASSIGN_OR_RETURN(const Json* f, GetField(obj, field));
  return JsonToString(*f, field);
}

Status CheckOnlyMembers(const Json& obj, std::initializer_list<std::string_view> allowed,
                        std::string_view what) {
  if (!obj.is_object()) return InvalidArgumentError(std::string(what) + ": expected a JSON object");
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    bool ok = false;
    for (auto a : allowed) ok |= (it.key() == a);
    if (!ok) {
      return InvalidArgumentError(std::string(what) + ": unknown member \"" + it.key() + "\"");
    }
  }
  return Status::OK();
}

}  // namespace cairn
