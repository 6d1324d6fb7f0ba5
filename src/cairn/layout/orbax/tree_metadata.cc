#include "cairn/layout/orbax/tree_metadata.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <set>
#include <unordered_map>

#include "cairn/layout/orbax/py_json.h"

namespace cairn::orbax {
namespace {

// Python repr() of a str (close enough for non-control characters, exact
// for ASCII): single quotes unless the text has ' and no ".
std::string PyRepr(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    uint8_t u = static_cast<uint8_t>(c);
    if (c == '\\') {
      out.append("\\\\");
    } else if (c == quote) {
      out.push_back('\\');
      out.push_back(c);
    } else if (c == '\n') {
      out.append("\\n");
    } else if (c == '\r') {
      out.append("\\r");
    } else if (c == '\t') {
      out.append("\\t");
    } else if (u < 0x20 || u == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", u);
      out.append(buf);
    } else {
      out.push_back(c);
    }
  }
  out.push_back(quote);
  return out;
}

std::string PathForError(const KeyPath& path) { return KeyString(path); }

// The child of a node under one key, during BuildTree: looking children up
// through one hash map keeps building linear in the number of siblings (a
// flat dict of 100,000 leaves). Keys point into the metadata's entries.
struct ChildKey {
  const TreeNode* parent;
  std::string_view key;
  bool operator==(const ChildKey& o) const { return parent == o.parent && key == o.key; }
};
struct ChildKeyHash {
  size_t operator()(const ChildKey& k) const {
    return std::hash<std::string_view>()(k.key) * 31 + std::hash<const void*>()(k.parent);
  }
};

Result<KeyEntry> ParseKeyEntry(const Json& j, std::string_view where) {
  if (!j.is_object()) return InvalidArgumentError(std::string(where) + ": key_metadata item is not an object");
  CAIRN_ASSIGN_OR_RETURN(const Json* key, GetField(j, "key"));
  CAIRN_ASSIGN_OR_RETURN(int64_t type, GetIntField(j, "key_type"));
  KeyEntry e;
  if (key->is_string()) {
    e.key = key->get<std::string>();
  } else if (key->is_number_unsigned()) {
    e.key = std::to_string(key->get<uint64_t>());
  } else if (key->is_number_integer()) {
    e.key = std::to_string(key->get<int64_t>());
  } else {
    return InvalidArgumentError(std::string(where) + ": `key` is neither a string nor an integer");
  }
  if (type == 1) {
    e.type = KeyType::kSequence;
    if (e.key.empty() || !std::all_of(e.key.begin(), e.key.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      return InvalidArgumentError(std::string(where) + ": sequence key `" + e.key + "` is not an index");
    }
  } else if (type == 2) {
    e.type = KeyType::kDict;
  } else {
    return InvalidArgumentError(std::string(where) + ": key_type " + std::to_string(type) +
                                " is neither 1 (sequence) nor 2 (dict)");
  }
  return e;
}

Result<TreeEntry> ParseEntry(const std::string& name, const Json& j, std::string_view file) {
  std::string where = std::string(file) + ", entry " + name;
  if (!j.is_object()) return InvalidArgumentError(where + ": not an object");
  TreeEntry entry;
  const Json* km = FindField(j, "key_metadata");
  if (km == nullptr || !km->is_array()) {
    return InvalidArgumentError(where + ": `key_metadata` missing or not a list");
  }
  if (km->size() > kMaxKeyPathLength) {
    return InvalidArgumentError(where + ": key path of " + std::to_string(km->size()) +
                                " keys, longer than " + std::to_string(kMaxKeyPathLength));
  }
  for (const Json& k : *km) {
    CAIRN_ASSIGN_OR_RETURN(KeyEntry e, ParseKeyEntry(k, where));
    entry.path.push_back(std::move(e));
  }
  const Json* vm = FindField(j, "value_metadata");
  if (vm == nullptr || !vm->is_object()) {
    return InvalidArgumentError(where + ": `value_metadata` missing or not an object");
  }
  auto vt = GetStringField(*vm, "value_type");
  if (!vt.ok()) return vt.status().Annotate(where);
  entry.value.value_type = *vt;
  if (const Json* sd = FindField(*vm, "skip_deserialize"); sd != nullptr && !sd->is_null()) {
    auto b = JsonToBool(*sd, "skip_deserialize");
    if (!b.ok()) return b.status().Annotate(where);
    entry.value.skip_deserialize = *b;
  }
  if (const Json* ws = FindField(*vm, "write_shape"); ws != nullptr && !ws->is_null()) {
    auto v = JsonToIntVector(*ws, "write_shape");
    if (!v.ok()) return v.status().Annotate(where);
    entry.value.write_shape = *v;
  }
  return entry;
}

Result<std::optional<bool>> OptionalBool(const Json& doc, std::string_view field,
                                         std::string_view where) {
  const Json* f = FindField(doc, field);
  if (f == nullptr || f->is_null()) return std::optional<bool>();
  auto b = JsonToBool(*f, field);
  if (!b.ok()) return b.status().Annotate(where);
  return std::optional<bool>(*b);
}

}  // namespace

Status CheckKeyPathLength(const KeyPath& path) {
  if (path.size() <= kMaxKeyPathLength) return Status::OK();
  KeyPath head(path.begin(), path.begin() + 4);
  std::string shown = KeyString(head);
  shown.insert(shown.size() - 1, ", ...");
  return InvalidArgumentError("key path " + shown + " has " + std::to_string(path.size()) +
                              " keys, more than " + std::to_string(kMaxKeyPathLength));
}

bool IsArrayValueType(std::string_view t) {
  return t == kJaxArray || t == kNumpyArray || t == kScalar;
}

bool IsEmptyValueType(std::string_view t) {
  return t == kEmptyDict || t == kEmptyList || t == kEmptyTuple || t == kEmptyNamedTuple ||
         t == kNone;
}

std::string ParamName(const KeyPath& path) {
  std::string out;
  for (size_t i = 0; i < path.size(); ++i) {
    if (i > 0) out.push_back('.');
    out.append(path[i].key);
  }
  return out;
}

std::string KeyString(const KeyPath& path) {
  std::string out = "(";
  for (size_t i = 0; i < path.size(); ++i) {
    if (i > 0) out.append(", ");
    out.append(PyRepr(path[i].key));
  }
  if (path.size() == 1) out.push_back(',');
  out.push_back(')');
  return out;
}

Result<TreeMetadata> ParseTreeMetadata(std::string_view text, std::string_view where) {
  CAIRN_ASSIGN_OR_RETURN(Json doc, ParseJson(text, where));
  if (!doc.is_object()) return InvalidArgumentError(std::string(where) + ": not a JSON object");
  const Json* tm = FindField(doc, "tree_metadata");
  if (tm == nullptr || !tm->is_object()) {
    return InvalidArgumentError(std::string(where) + ": `tree_metadata` missing or not an object");
  }
  TreeMetadata md;
  for (const auto& [name, value] : tm->items()) {
    CAIRN_ASSIGN_OR_RETURN(TreeEntry e, ParseEntry(name, value, where));
    md.entries.push_back(std::move(e));
  }
  CAIRN_ASSIGN_OR_RETURN(md.use_ocdbt, OptionalBool(doc, "use_ocdbt", where));
  CAIRN_ASSIGN_OR_RETURN(std::optional<bool> z3, OptionalBool(doc, "use_zarr3", where));
  md.use_zarr3 = z3.value_or(false);
  CAIRN_ASSIGN_OR_RETURN(std::optional<bool> sf,
                         OptionalBool(doc, "store_array_data_equal_to_fill_value", where));
  md.store_array_data_equal_to_fill_value = sf.value_or(false);
  if (const Json* cm = FindField(doc, "custom_metadata")) md.custom_metadata = *cm;
  if (const Json* vmt = FindField(doc, "value_metadata_tree"); vmt != nullptr && vmt->is_string()) {
    md.value_metadata_tree = vmt->get<std::string>();
  }
  return md;
}

std::string EmitTreeMetadata(const TreeMetadata& md) {
  std::string out = "{\"tree_metadata\": {";
  for (size_t i = 0; i < md.entries.size(); ++i) {
    const TreeEntry& e = md.entries[i];
    if (i > 0) out.append(", ");
    out.append(PyJsonString(KeyString(e.path)));
    out.append(": {\"key_metadata\": [");
    for (size_t k = 0; k < e.path.size(); ++k) {
      if (k > 0) out.append(", ");
      out.append("{\"key\": ");
      out.append(PyJsonString(e.path[k].key));
      out.append(", \"key_type\": ");
      out.append(std::to_string(static_cast<int>(e.path[k].type)));
      out.push_back('}');
    }
    out.append("], \"value_metadata\": {\"value_type\": ");
    out.append(PyJsonString(e.value.value_type));
    out.append(", \"skip_deserialize\": ");
    out.append(e.value.skip_deserialize ? "true" : "false");
    if (e.value.write_shape) {
      out.append(", \"write_shape\": ");
      out.append(PyJsonDumps(Json(*e.value.write_shape)));
    }
    out.append("}}");
  }
  out.append("}, \"use_ocdbt\": ");
  out.append(md.use_ocdbt ? (*md.use_ocdbt ? "true" : "false") : "null");
  out.append(", \"use_zarr3\": ");
  out.append(md.use_zarr3 ? "true" : "false");
  out.append(", \"store_array_data_equal_to_fill_value\": ");
  out.append(md.store_array_data_equal_to_fill_value ? "true" : "false");
  out.append(", \"custom_metadata\": ");
  out.append(PyJsonDumps(md.custom_metadata));
  if (md.value_metadata_tree) {
    out.append(", \"value_metadata_tree\": ");
    out.append(PyJsonString(*md.value_metadata_tree));
  }
  out.push_back('}');
  return out;
}

Status CheckParamNames(const std::vector<TreeEntry>& entries) {
  std::map<std::string, const TreeEntry*> by_name;
  for (const TreeEntry& e : entries) {
    if (!IsArrayValueType(e.value.value_type) && e.value.value_type != kString) continue;
    auto [it, inserted] = by_name.emplace(ParamName(e.path), &e);
    if (!inserted) {
      return InvalidArgumentError("Orbax param name collision: key paths " +
                                  KeyString(it->second->path) + " and " + KeyString(e.path) +
                                  " both map to param name `" + it->first +
                                  "` (Orbax joins keys with '.' without escaping)");
    }
  }
  // A param whose name is a '/'-prefix of another would nest one array's
  // keys inside the other's.
  for (auto it = by_name.begin(); it != by_name.end(); ++it) {
    auto next = std::next(it);
    if (next == by_name.end()) break;
    if (next->first.size() > it->first.size() &&
        next->first.compare(0, it->first.size() + 1, it->first + "/") == 0) {
      return InvalidArgumentError("Orbax param names `" + it->first + "` and `" + next->first +
                                  "` nest: the keys of one array would lie inside the other");
    }
  }
  return Status::OK();
}

Result<std::unique_ptr<TreeNode>> BuildTree(const TreeMetadata& md) {
  auto root = std::make_unique<TreeNode>();
  if (md.entries.size() == 1 && md.entries[0].path.empty()) {
    root->kind = TreeNode::Kind::kLeaf;
    root->leaf = &md.entries[0];
    return root;
  }
  std::unordered_map<ChildKey, TreeNode*, ChildKeyHash> child_of;
  child_of.reserve(md.entries.size());
  for (const TreeEntry& e : md.entries) {
    if (e.path.empty()) {
      return InvalidArgumentError("_METADATA: an entry with an empty key path among others");
    }
    CAIRN_RETURN_IF_ERROR(CheckKeyPathLength(e.path).Annotate("_METADATA"));
    TreeNode* node = root.get();
    for (size_t i = 0; i < e.path.size(); ++i) {
      const KeyEntry& k = e.path[i];
      TreeNode::Kind want = k.type == KeyType::kSequence ? TreeNode::Kind::kList : TreeNode::Kind::kDict;
      if (node->children.empty() && node->leaf == nullptr) node->kind = want;
      if (node->kind != want) {
        return InvalidArgumentError("_METADATA: node at " + PathForError(KeyPath(e.path.begin(), e.path.begin() + i)) +
                                    " is used both as a list and as a dict");
      }
      auto [slot, inserted] = child_of.try_emplace(ChildKey{node, k.key}, nullptr);
      TreeNode* child = slot->second;
      bool last = i + 1 == e.path.size();
      if (inserted) {
        node->children.emplace_back(k.key, std::make_unique<TreeNode>());
        child = node->children.back().second.get();
        slot->second = child;
        if (last) {
          if (e.value.value_type == kEmptyDict || e.value.value_type == kEmptyNamedTuple) {
            child->kind = TreeNode::Kind::kDict;
          } else if (e.value.value_type == kEmptyList || e.value.value_type == kEmptyTuple) {
            child->kind = TreeNode::Kind::kList;
          } else {
            child->kind = TreeNode::Kind::kLeaf;
            child->leaf = &e;
          }
          // Empty containers are marked with leaf = entry so a later entry
          // inside them is detected as a conflict.
          if (child->kind != TreeNode::Kind::kLeaf) child->leaf = &e;
        }
      } else if (last || child->kind == TreeNode::Kind::kLeaf ||
                 (child->leaf != nullptr && child->children.empty())) {
        return InvalidArgumentError("_METADATA: key path " + PathForError(e.path) +
                                    " conflicts with another entry");
      }
      node = child;
    }
  }
  // Lists: order by index and require 0..n-1; empty-container markers off.
  std::vector<TreeNode*> stack = {root.get()};
  while (!stack.empty()) {
    TreeNode* n = stack.back();
    stack.pop_back();
    if (n->kind != TreeNode::Kind::kLeaf) n->leaf = nullptr;
    if (n->kind == TreeNode::Kind::kList) {
      std::sort(n->children.begin(), n->children.end(), [](const auto& a, const auto& b) {
        return a.first.size() != b.first.size() ? a.first.size() < b.first.size() : a.first < b.first;
      });
      for (size_t i = 0; i < n->children.size(); ++i) {
        if (n->children[i].first != std::to_string(i)) {
          return InvalidArgumentError("_METADATA: list has no element " + std::to_string(i) +
                                      " (next index is " + n->children[i].first + ")");
        }
      }
    }
    for (auto& [name, c] : n->children) stack.push_back(c.get());
  }
  return root;
}

}  // namespace cairn::orbax
