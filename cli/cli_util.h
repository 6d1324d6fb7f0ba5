// Small output helpers shared by the CLI subcommands.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cairn/status.h"

namespace cairn::cli {

// One-line JSON; invalid UTF-8 is replaced rather than thrown on.
inline std::string DumpLine(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// "[4,6]".
inline std::string ShapeString(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i > 0 ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

// Prints "cairn <command>: <what>: <status>" to stderr and returns `code`.
inline int PrintError(const char* command, const std::string& what, const Status& status,
                      int code) {
  std::fprintf(stderr, "cairn %s: %s: %s\n", command, what.c_str(), status.ToString().c_str());
  return code;
}

}  // namespace cairn::cli
