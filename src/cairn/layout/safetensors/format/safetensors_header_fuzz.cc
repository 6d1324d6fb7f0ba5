// libFuzzer target for the safetensors header.
//
// The input is a whole safetensors file. Whatever header parses must
// describe tensors that tile the data buffer, and rebuilding it from its
// tensors and metadata must give a header that parses to the same tensors.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "cairn/layout/safetensors/format/safetensors_header.h"

using namespace cairn::safetensors;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto n = ParseHeaderLength(cairn::ByteView(data, size), size, "fuzz");
  if (!n.ok()) return 0;
  std::string json(reinterpret_cast<const char*>(data) + kLengthPrefixBytes, *n);
  auto header = ParseHeader(json, size, "fuzz");
  if (!header.ok()) return 0;
  uint64_t cursor = 0;
  std::vector<TensorSpec> specs;
  for (const TensorEntry& e : header->tensors) {
    if (e.begin != cursor || e.end < e.begin) std::abort();
    cursor = e.end;
    specs.push_back({e.name, e.dtype, e.shape});
  }
  if (header->data_start + cursor != size) std::abort();
  auto built = BuildHeader(specs, header->metadata);
  if (!built.ok()) return 0;  // e.g. a tensor named like a reserved key
  auto again = ParseHeader(built->bytes.substr(kLengthPrefixBytes),
                           built->bytes.size() + cursor, "fuzz rebuilt");
  if (!again.ok() || again->tensors.size() != header->tensors.size()) std::abort();
  return 0;
}
