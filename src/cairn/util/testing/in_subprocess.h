// Runs a test check in a child process, so that a stack overflow or abort
// in the code under test fails that one check instead of killing the whole
// test binary (hostile-input regression tests: deep nesting and the like).
//
//   CAIRN_EXPECT_IN_SUBPROCESS([] {
//     auto r = ParseJson(deep, "x");
//     return r.status().code() == StatusCode::kInvalidArgument
//                ? ::testing::AssertionSuccess()
//                : ::testing::AssertionFailure() << r.status().ToString();
//   });
//
// The callable returns a ::testing::AssertionResult; the child exits 0 on
// success and 1 (after printing the failure to stderr, which gtest shows)
// on failure; a crash shows up as a signal. Uses gtest's death-test
// machinery in "threadsafe" style (the child re-executes the test binary
// for just this test, so thread pools in the parent do not matter).
#pragma once

#include <cstdio>
#include <cstdlib>

#include <gtest/gtest.h>

#define CAIRN_EXPECT_IN_SUBPROCESS(check)                                     \
  do {                                                                        \
    GTEST_FLAG_SET(death_test_style, "threadsafe");                           \
    EXPECT_EXIT(                                                              \
        {                                                                     \
          ::testing::AssertionResult cairn_result_ = (check)();               \
          if (!cairn_result_) {                                               \
            std::fprintf(stderr, "%s\n", cairn_result_.message());            \
            std::fflush(stderr);                                              \
            std::_Exit(1);                                                    \
          }                                                                   \
          std::_Exit(0);                                                      \
        },                                                                    \
        ::testing::ExitedWithCode(0), "");                                    \
  } while (0)
