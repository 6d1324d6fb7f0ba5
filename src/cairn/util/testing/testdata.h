// Finding the repository's golden test data (tests/testdata) from C++ tests.
//
// Every test binary is compiled with CAIRN_TESTDATA_DIR, the absolute path of
// tests/testdata in the source tree (cmake/cairn_helpers.cmake); the
// environment variable of the same name overrides it at run time. A test
// whose data is missing must fail with a message naming the path, never
// crash on an empty read: get paths and bytes through these helpers and
// ASSERT on the result.
//
//   auto db = TestdataPathOrFail("tensorstore-written/ocdbt/files_min_arity.ocdbt");
//   ASSERT_TRUE(db);
//
// Header-only so that any layer's tests can use it without linking.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include <gtest/gtest.h>

namespace cairn::testing {

// The folder holding the golden files.
inline std::filesystem::path TestdataDir() {
  if (const char* env = std::getenv("CAIRN_TESTDATA_DIR"); env != nullptr && *env != '\0') {
    return env;
  }
#ifdef CAIRN_TESTDATA_DIR
  return CAIRN_TESTDATA_DIR;
#else
  return "tests/testdata";
#endif
}

// TestdataDir() / `relative` when it exists; otherwise records a non-fatal
// test failure "missing test data: <path>" and returns nullopt.
inline std::optional<std::filesystem::path> TestdataPathOrFail(std::string_view relative) {
  std::filesystem::path p = TestdataDir() / std::filesystem::path(relative);
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) {
    ADD_FAILURE() << "missing test data: " << p.string()
                  << " does not exist (the golden files live in the repository's tests/testdata;"
                     " CAIRN_TESTDATA_DIR points elsewhere at run time)";
    return std::nullopt;
  }
  return p;
}

// The bytes of the regular file TestdataDir() / `relative`; records a
// non-fatal failure naming the path and returns nullopt if it is missing or
// unreadable.
inline std::optional<std::string> ReadTestdataOrFail(std::string_view relative) {
  auto p = TestdataPathOrFail(relative);
  if (!p) return std::nullopt;
  std::error_code ec;
  if (!std::filesystem::is_regular_file(*p, ec)) {
    ADD_FAILURE() << "test data " << p->string() << " is not a regular file";
    return std::nullopt;
  }
  std::ifstream in(*p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  if (!in.good() && !in.eof()) {
    ADD_FAILURE() << "cannot read test data " << p->string();
    return std::nullopt;
  }
  return ss.str();
}

}  // namespace cairn::testing
