// Small output helpers shared by the CLI subcommands.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "cairn/result.h"
#include "cairn/status.h"

namespace cairn::cli {

// The exit status of every command (kExitStatusHelp ends each --help).
inline constexpr int kExitOk = 0;
inline constexpr int kExitProblems = 1;  // problems found, differences, or a failure while working
inline constexpr int kExitUsage = 2;     // bad flags or input: missing path, not a checkpoint, ...
inline constexpr int kExitInterrupted = 130;  // Ctrl-C (SIGINT); 143 for SIGTERM (signals.h)

inline constexpr const char* kExitStatusHelp =
    "Exit status: 0 ok; 1 problems found (verify), differences (diff), or a failure while "
    "working (a read or write that failed); 2 usage or input errors (bad flags, a path that "
    "does not exist, not a checkpoint); 130 interrupted (Ctrl-C; 143 for SIGTERM).";

// The exit status for an error: 2 when the input was wrong (a bad argument,
// nothing at the path, a destination that exists), else 1.
inline int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kAlreadyExists:
      return kExitUsage;
    default:
      return kExitProblems;
  }
}

// Levenshtein distance.
inline size_t EditDistance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The name of `names` closest to `name`, when one is close enough to be a
// typo (at most 2 edits, and fewer than the name's length); "" otherwise.
inline std::string ClosestName(const std::string& name, const std::vector<std::string>& names) {
  std::string best;
  size_t best_distance = 3;
  for (const std::string& n : names) {
    const size_t d = EditDistance(name, n);
    if (d < best_distance && d < std::max(name.size(), n.size())) {
      best = n;
      best_distance = d;
    }
  }
  return best;
}

// "512 B", "1.5 KiB", "218.1 MiB", "3.0 GiB" (as gsutil du -h).
inline std::string HumanSize(uint64_t bytes) {
  if (bytes < 1024) return std::to_string(bytes) + " B";
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes) / 1024;
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f %s", value, kUnits[unit]);
  return buf;
}

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

// "A=B" -> {A, B}: a --rename or --dtype rule (convert, diff).
inline Result<std::pair<std::string, std::string>> SplitRule(const std::string& rule, const char* what) {
  size_t eq = rule.find('=');
  if (eq == std::string::npos || eq == 0) {
    return Status(StatusCode::kInvalidArgument,
                  std::string(what) + " `" + rule + "` is not of the form PATTERN=VALUE");
  }
  return std::make_pair(rule.substr(0, eq), rule.substr(eq + 1));
}

// Prints "cairn <command>: <what>: <status>" to stderr and returns `code`
// (ExitCodeFor(status) unless a command knows better).
inline int PrintError(const char* command, const std::string& what, const Status& status,
                      int code = -1) {
  // `what` is left out when empty or when the message already names it.
  std::string named = what;
  std::erase(named, '`');
  if (what.empty() || status.message().find(named) != std::string_view::npos) {
    std::fprintf(stderr, "cairn %s: %s\n", command, status.ToString().c_str());
  } else {
    std::fprintf(stderr, "cairn %s: %s: %s\n", command, what.c_str(), status.ToString().c_str());
  }
  return code >= 0 ? code : ExitCodeFor(status);
}

}  // namespace cairn::cli
