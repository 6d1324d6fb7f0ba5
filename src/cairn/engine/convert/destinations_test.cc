// The one table of conversion destinations: ConvertCheckpoint and the CLI
// find a destination by its row, and an unknown one is refused naming
// every row.
#include "cairn/engine/convert/destinations.h"

#include <gtest/gtest.h>

namespace cairn::engine {
namespace {

TEST(DestinationFormats, OneRowPerFormat) {
  EXPECT_EQ(DestinationFormatNames(),
            (std::vector<std::string>{"orbax", "orbax-zarr2", "axlearn", "safetensors"}));
  for (const DestinationFormat& f : DestinationFormats()) {
    auto found = FindDestinationFormat(f.name);
    ASSERT_TRUE(found.ok()) << found.status().ToString();
    EXPECT_EQ(*found, &f);
    EXPECT_NE(f.prepare, nullptr) << f.name;
  }
}

TEST(DestinationFormats, UnknownNamesEveryRow) {
  auto found = FindDestinationFormat("onnx");
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(found.status().message().find("cannot convert to `onnx` (supported: orbax, orbax-zarr2, axlearn, safetensors)"),
            std::string::npos)
      << found.status().ToString();
  ConvertCheckpointRequest r;
  r.source = "memory://nothing/";
  r.dest = "memory://out/";
  r.to = "onnx";
  auto converted = ConvertCheckpoint(r);
  EXPECT_EQ(converted.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(converted.status().message().find("`onnx`"), std::string::npos) << converted.status().ToString();
}

}  // namespace
}  // namespace cairn::engine
