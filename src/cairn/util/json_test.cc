// ParseJson's nesting limit (docs/limits.md): documents up to kMaxJsonDepth
// levels parse and can be copied, dumped and compared; deeper ones are
// InvalidArgument naming the document, however deep they go.
#include <gtest/gtest.h>

#include <string>

#include "cairn/util/json.h"
#include "cairn/util/testing/in_subprocess.h"

namespace cairn {
namespace {

// `depth` nested arrays around a 1: "[[1]]" for depth 2.
std::string NestedArrays(size_t depth) {
  return std::string(depth, '[') + "1" + std::string(depth, ']');
}

// `depth` nested objects {"a": {"a": ... 1}}.
std::string NestedObjects(size_t depth) {
  std::string s;
  for (size_t i = 0; i < depth; ++i) s += "{\"a\":";
  s += "1";
  s += std::string(depth, '}');
  return s;
}

::testing::AssertionResult IsTooDeep(const Result<Json>& r, const std::string& what) {
  if (r.ok()) return ::testing::AssertionFailure() << "parsed";
  if (r.status().code() != StatusCode::kInvalidArgument) {
    return ::testing::AssertionFailure() << r.status().ToString();
  }
  const std::string msg(r.status().message());
  if (msg.find(what) == std::string::npos || msg.find("nested deeper than 128") == std::string::npos) {
    return ::testing::AssertionFailure() << "message: " << msg;
  }
  return ::testing::AssertionSuccess();
}

TEST(JsonDepth, AtTheLimitParsesAndRoundTrips) {
  for (const std::string& text : {NestedArrays(kMaxJsonDepth), NestedObjects(kMaxJsonDepth)}) {
    auto j = ParseJson(text, "attrs.json");
    ASSERT_TRUE(j.ok()) << j.status().ToString();
    Json copy = *j;
    EXPECT_EQ(copy, *j);
    EXPECT_EQ(DumpJson(copy), text);
  }
  // Scalars and empty containers inside the deepest container count nothing.
  EXPECT_TRUE(ParseJson(std::string(kMaxJsonDepth - 1, '[') + "[], {}" +
                            std::string(kMaxJsonDepth - 1, ']'),
                        "x")
                  .ok());
}

TEST(JsonDepth, OneLevelDeeperIsInvalidArgument) {
  EXPECT_TRUE(IsTooDeep(ParseJson(NestedArrays(kMaxJsonDepth + 1), "attrs.json"), "attrs.json"));
  EXPECT_TRUE(IsTooDeep(ParseJson(NestedObjects(kMaxJsonDepth + 1), "zarr.json"), "zarr.json"));
  // Deep inside an otherwise ordinary document, after valid members.
  const std::string doc = R"({"shape": [1], "attributes": {"x": )" +
                          NestedArrays(kMaxJsonDepth) + "}}";
  EXPECT_TRUE(IsTooDeep(ParseJson(doc, "zarr.json"), "zarr.json"));
}

TEST(JsonDepth, BracketsInsideStringsDoNotCount) {
  // Strings full of brackets, escaped quotes and backslashes at the limit.
  const std::string inner = R"(["[[[[{{{{", "\"[[[[", "\\", "a\\\"[[{"])";
  const std::string doc = std::string(kMaxJsonDepth - 1, '[') + inner + std::string(kMaxJsonDepth - 1, ']');
  auto j = ParseJson(doc, "x");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  const Json* deepest = &*j;
  for (int i = 0; i < kMaxJsonDepth - 1; ++i) deepest = &(*deepest)[0];
  EXPECT_EQ((*deepest)[1], "\"[[[[");
  EXPECT_EQ((*deepest)[3], "a\\\"[[{");
  // One more real level is too deep even with the strings around.
  EXPECT_TRUE(IsTooDeep(ParseJson("[" + doc + "]", "x"), "x"));
  // A key full of brackets counts nothing either.
  EXPECT_TRUE(ParseJson(R"({"{{{[[[": 1})", "x").ok());
}

TEST(JsonDepth, SyntaxErrorsStillSayNotValidJson) {
  auto r = ParseJson(NestedArrays(10).substr(1), "meta");  // one '[' short
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("meta: not valid JSON"), std::string::npos);
  // Control: the balanced document parses.
  EXPECT_TRUE(ParseJson(NestedArrays(10), "meta").ok());
}

// Before the limit, a million levels (2 MB of brackets) overflowed the stack
// when the parsed value was destroyed, dumped or compared.
TEST(JsonDepth, MillionLevelsFailWithoutCrashing) {
  CAIRN_EXPECT_IN_SUBPROCESS([] {
    return IsTooDeep(ParseJson(NestedArrays(1'000'000), "deep.json"), "deep.json");
  });
  CAIRN_EXPECT_IN_SUBPROCESS([] {
    return IsTooDeep(ParseJson(NestedObjects(300'000), "deep.json"), "deep.json");
  });
  // Unbalanced too: the limit is hit before the missing brackets matter.
  CAIRN_EXPECT_IN_SUBPROCESS([] {
    return IsTooDeep(ParseJson(std::string(500'000, '['), "open.json"), "open.json");
  });
}

}  // namespace
}  // namespace cairn
