// Checked access to untrusted JSON (metadata files).
//
// nlohmann::json throws on type errors; cairn's library must not. Every read
// of a field from a stored document goes through these helpers, which check
// the type first and return InvalidArgument naming the field.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "cairn/result.h"

namespace cairn {

using Json = nlohmann::json;

// The deepest nesting of arrays and objects ParseJson accepts: `1` has
// depth 0, `[1]` and `{"a": 1}` depth 1, `[[1]]` depth 2. Copying, dumping,
// comparing and printing a Json recurse once per level, so a document that
// is only "[[[[..." would otherwise overflow the stack a few hundred KB in.
// Every Json cairn builds from input comes through ParseJson, so no deeper
// value exists (docs/limits.md).
inline constexpr int kMaxJsonDepth = 128;

// Parses `text` as JSON; InvalidArgument (with `what` in the message) on a
// syntax error or nesting deeper than kMaxJsonDepth. Never throws, never
// recurses per level.
Result<Json> ParseJson(std::string_view text, std::string_view what);

// Serializes compactly with sorted keys (std::map), as TensorStore does.
std::string DumpJson(const Json& j);

// Field accessors. `obj` must be an object (else InvalidArgument). Missing
// fields: the Get* forms fail, the Find* forms return nullptr / nullopt.
const Json* FindField(const Json& obj, std::string_view field);
Result<const Json*> GetField(const Json& obj, std::string_view field);

Result<int64_t> JsonToInt(const Json& j, std::string_view what);
Result<uint64_t> JsonToUInt(const Json& j, std::string_view what);
Result<std::string> JsonToString(const Json& j, std::string_view what);
Result<bool> JsonToBool(const Json& j, std::string_view what);
Result<std::vector<int64_t>> JsonToIntVector(const Json& j, std::string_view what);

Result<int64_t> GetIntField(const Json& obj, std::string_view field);
Result<std::string> GetStringField(const Json& obj, std::string_view field);

// Checks that `obj` is an object with no members outside `allowed`.
Status CheckOnlyMembers(const Json& obj, std::initializer_list<std::string_view> allowed,
                        std::string_view what);

}  // namespace cairn
