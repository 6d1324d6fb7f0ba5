#include "cairn/layout/orbax/metadata_files.h"

#include <set>

#include "cairn/layout/orbax/py_json.h"

namespace cairn::orbax {
namespace {

constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

Result<std::optional<int64_t>> OptionalInt(const Json& doc, std::string_view field,
                                           std::string_view where) {
  const Json* f = FindField(doc, field);
  if (f == nullptr || f->is_null()) return std::optional<int64_t>();
  auto v = JsonToInt(*f, field);
  if (!v.ok()) return v.status().Annotate(where);
  return std::optional<int64_t>(*v);
}

Result<std::map<std::string, std::string>> ParseStringMap(std::string_view text,
                                                          std::string_view where) {
  CAIRN_ASSIGN_OR_RETURN(Json doc, ParseJson(text, where));
  if (!doc.is_object()) return InvalidArgumentError(std::string(where) + ": not a JSON object");
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : doc.items()) {
    if (!v.is_string()) {
      return InvalidArgumentError(std::string(where) + ": value of `" + k + "` is not a string");
    }
    out.emplace(k, v.get<std::string>());
  }
  return out;
}

std::string EmitStringMap(const std::map<std::string, std::string>& m) {
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : m) {
    if (!first) out.append(", ");
    first = false;
    out.append(PyJsonString(k));
    out.append(": ");
    out.append(PyJsonString(v));
  }
  out.push_back('}');
  return out;
}

}  // namespace

Result<CheckpointMetadata> ParseCheckpointMetadata(std::string_view text, std::string_view where) {
  CAIRN_ASSIGN_OR_RETURN(Json doc, ParseJson(text, where));
  if (!doc.is_object()) return InvalidArgumentError(std::string(where) + ": not a JSON object");
  CheckpointMetadata md;
  if (const Json* h = FindField(doc, "item_handlers"); h != nullptr && !h->is_null()) {
    if (h->is_string()) {
      md.item_handlers = h->get<std::string>();
    } else if (h->is_object()) {
      std::map<std::string, std::string> m;
      for (const auto& [k, v] : h->items()) {
        // A handler Orbax could not name is stored as null.
        m.emplace(k, v.is_string() ? v.get<std::string>() : std::string());
      }
      md.item_handlers = std::move(m);
    } else {
      return InvalidArgumentError(std::string(where) + ": `item_handlers` is neither a string nor an object");
    }
  }
  if (const Json* m = FindField(doc, "metrics"); m != nullptr && !m->is_null()) md.metrics = *m;
  if (const Json* m = FindField(doc, "performance_metrics"); m != nullptr && !m->is_null()) {
    md.performance_metrics = *m;
  }
  CAIRN_ASSIGN_OR_RETURN(md.init_timestamp_nsecs, OptionalInt(doc, "init_timestamp_nsecs", where));
  CAIRN_ASSIGN_OR_RETURN(md.commit_timestamp_nsecs, OptionalInt(doc, "commit_timestamp_nsecs", where));
  if (const Json* c = FindField(doc, "custom_metadata"); c != nullptr && !c->is_null()) {
    md.custom_metadata = *c;
  }
  static const std::set<std::string> kKnown = {"item_handlers",        "metrics",
                                               "performance_metrics",  "init_timestamp_nsecs",
                                               "commit_timestamp_nsecs", "custom_metadata"};
  for (const auto& [k, v] : doc.items()) {
    if (kKnown.count(k) == 0 && md.custom_metadata.is_object()) md.custom_metadata[k] = v;
  }
  return md;
}

std::string EmitCheckpointMetadata(const CheckpointMetadata& md) {
  std::string out = "{\"item_handlers\": ";
  if (const auto* s = std::get_if<std::string>(&md.item_handlers)) {
    out.append(PyJsonString(*s));
  } else if (const auto* m = std::get_if<std::map<std::string, std::string>>(&md.item_handlers)) {
    out.append(EmitStringMap(*m));
  } else {
    out.append("null");
  }
  out.append(", \"metrics\": ");
  out.append(PyJsonDumps(md.metrics));
  out.append(", \"performance_metrics\": ");
  out.append(PyJsonDumps(md.performance_metrics));
  out.append(", \"init_timestamp_nsecs\": ");
  out.append(md.init_timestamp_nsecs ? std::to_string(*md.init_timestamp_nsecs) : "null");
  out.append(", \"commit_timestamp_nsecs\": ");
  out.append(md.commit_timestamp_nsecs ? std::to_string(*md.commit_timestamp_nsecs) : "null");
  out.append(", \"custom_metadata\": ");
  out.append(PyJsonDumps(md.custom_metadata));
  out.push_back('}');
  return out;
}

Result<std::vector<ArrayMetadataRecord>> ParseArrayMetadatas(std::string_view text,
                                                             std::string_view where) {
  CAIRN_ASSIGN_OR_RETURN(Json doc, ParseJson(text, where));
  const Json* list = doc.is_object() ? FindField(doc, "array_metadatas") : nullptr;
  if (list == nullptr || !list->is_array()) {
    return InvalidArgumentError(std::string(where) + ": `array_metadatas` missing or not a list");
  }
  std::vector<ArrayMetadataRecord> out;
  for (const Json& item : *list) {
    const Json* am = item.is_object() ? FindField(item, "array_metadata") : nullptr;
    if (am == nullptr || !am->is_object()) {
      return InvalidArgumentError(std::string(where) + ": an item has no `array_metadata` object");
    }
    ArrayMetadataRecord r;
    auto name = GetStringField(*am, "param_name");
    if (!name.ok()) return name.status().Annotate(where);
    r.param_name = *name;
    std::string at = std::string(where) + ", param `" + r.param_name + "`";
    for (auto [field, dst] : {std::pair{"write_shape", &r.write_shape},
                              std::pair{"chunk_shape", &r.chunk_shape}}) {
      const Json* f = FindField(*am, field);
      if (f == nullptr || f->is_null()) continue;
      auto v = JsonToIntVector(*f, field);
      if (!v.ok()) return v.status().Annotate(at);
      *dst = *v;
    }
    if (const Json* ext = FindField(*am, "ext_metadata"); ext != nullptr && ext->is_object()) {
      if (const Json* impl = FindField(*ext, "random_key_impl"); impl != nullptr && !impl->is_null()) {
        auto s = JsonToString(*impl, "random_key_impl");
        if (!s.ok()) return s.status().Annotate(at);
        r.random_key_impl = *s;
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::string EmitArrayMetadatas(const std::vector<ArrayMetadataRecord>& records) {
  std::string out = "{\"array_metadatas\": [";
  for (size_t i = 0; i < records.size(); ++i) {
    const ArrayMetadataRecord& r = records[i];
    if (i > 0) out.append(", ");
    out.append("{\"array_metadata\": {\"param_name\": ");
    out.append(PyJsonString(r.param_name));
    out.append(", \"write_shape\": ");
    out.append(PyJsonDumps(Json(r.write_shape)));
    out.append(", \"chunk_shape\": ");
    out.append(PyJsonDumps(Json(r.chunk_shape)));
    out.append(", \"ext_metadata\": ");
    if (r.random_key_impl) {
      out.append("{\"random_key_impl\": " + PyJsonString(*r.random_key_impl) + "}");
    } else {
      out.append("null");
    }
    out.append("}}");
  }
  out.append("]}");
  return out;
}

Status ValidateArrayMetadatas(const std::vector<std::vector<ArrayMetadataRecord>>& per_process) {
  if (per_process.empty()) return Status::OK();
  std::map<std::string, const ArrayMetadataRecord*> first;
  for (const ArrayMetadataRecord& r : per_process[0]) first.emplace(r.param_name, &r);
  for (size_t p = 1; p < per_process.size(); ++p) {
    if (per_process[p].size() != first.size()) {
      return FailedPreconditionError("array_metadatas: process_" + std::to_string(p) + " lists " +
                                     std::to_string(per_process[p].size()) +
                                     " params, process_0 lists " + std::to_string(first.size()));
    }
    for (const ArrayMetadataRecord& r : per_process[p]) {
      auto it = first.find(r.param_name);
      if (it == first.end()) {
        return FailedPreconditionError("array_metadatas: param `" + r.param_name + "` of process_" +
                                       std::to_string(p) + " is missing in process_0");
      }
      if (!(*it->second == r)) {
        return FailedPreconditionError("array_metadatas: param `" + r.param_name +
                                       "` differs between process_0 and process_" +
                                       std::to_string(p) + " (write/chunk shape or key impl)");
      }
    }
  }
  return Status::OK();
}

Result<std::map<std::string, std::string>> ParseShardingFile(std::string_view text,
                                                             std::string_view where) {
  CAIRN_ASSIGN_OR_RETURN(auto encoded, ParseStringMap(text, where));
  std::map<std::string, std::string> out;
  for (auto& [k, v] : encoded) {
    auto name = Base64UrlDecode(k);
    if (!name.ok()) return name.status().Annotate(std::string(where) + ", key `" + k + "`");
    out.emplace(std::move(*name), std::move(v));
  }
  return out;
}

std::string EmitShardingFile(const std::map<std::string, std::string>& shardings) {
  std::map<std::string, std::string> encoded;
  for (const auto& [k, v] : shardings) encoded.emplace(Base64UrlEncode(k), v);
  return EmitStringMap(encoded);
}

Result<std::map<std::string, std::string>> ParseStringsFile(std::string_view text,
                                                            std::string_view where) {
  return ParseStringMap(text, where);
}

std::string EmitStringsFile(const std::map<std::string, std::string>& strings) {
  return EmitStringMap(strings);
}

std::string Base64UrlEncode(std::string_view bytes) {
  std::string out;
  size_t i = 0;
  auto b = [&](size_t k) { return static_cast<uint32_t>(static_cast<uint8_t>(bytes[k])); };
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = (b(i) << 16) | (b(i + 1) << 8) | b(i + 2);
    for (int s = 18; s >= 0; s -= 6) out.push_back(kB64[(v >> s) & 63]);
  }
  size_t rest = bytes.size() - i;
  if (rest == 1) {
    uint32_t v = b(i) << 16;
    out.push_back(kB64[(v >> 18) & 63]);
    out.push_back(kB64[(v >> 12) & 63]);
    out.append("==");
  } else if (rest == 2) {
    uint32_t v = (b(i) << 16) | (b(i + 1) << 8);
    out.push_back(kB64[(v >> 18) & 63]);
    out.push_back(kB64[(v >> 12) & 63]);
    out.push_back(kB64[(v >> 6) & 63]);
    out.push_back('=');
  }
  return out;
}

Result<std::string> Base64UrlDecode(std::string_view text) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v = c >= 'A' && c <= 'Z'   ? c - 'A'
            : c >= 'a' && c <= 'z' ? c - 'a' + 26
            : c >= '0' && c <= '9' ? c - '0' + 52
            : c == '-'             ? 62
            : c == '_'             ? 63
                                   : -1;
    if (v < 0) return InvalidArgumentError("not base64url: `" + std::string(text) + "`");
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  if (bits >= 6) return InvalidArgumentError("truncated base64url: `" + std::string(text) + "`");
  return out;
}

}  // namespace cairn::orbax
