// libFuzzer target for zarr metadata and chunk reading.
//
// The input up to the first NUL byte is a metadata document; it is parsed
// as stored v3 and v2 metadata and completed as partial metadata. Whatever
// parses must serialize to a document that parses back to the same text.
// When v3 or v2 metadata parses with chunks of at most 64 KiB, the rest of
// the input is stored as chunk 0 and the whole array read back: the read
// must succeed or fail with a Status, never crash or allocate without bound.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "cairn/kvstore/memory/memory_kvstore.h"
#include "cairn/zarr/array.h"

namespace {

using cairn::ZarrFormat;

void CheckRoundTrip(ZarrFormat format, const cairn::ArrayMetadata& m) {
  const std::string text = m.ToJsonString();
  auto json = cairn::ParseJson(text, "fuzz");
  if (!json.ok()) std::abort();
  auto again = cairn::ParseArrayMetadata(format, *json);
  if (!again.ok() || again->ToJsonString() != text) std::abort();
}

void ReadChunk(ZarrFormat format, const cairn::ArrayMetadata& m, std::string_view chunk) {
  if (m.chunk_spec().num_bytes() > (64 << 10)) return;
  cairn::Shape array_shape = m.shape;
  for (size_t d = 0; d < array_shape.size(); ++d) {
    array_shape[d] = std::min(array_shape[d], m.chunk_shape[d]);
  }
  auto store = std::make_shared<cairn::MemoryKvStore>();
  if (!store->Put(cairn::MetadataKey(format), cairn::AsBytes(m.ToJsonString())).ok()) return;
  auto array = cairn::ZarrArray::Open(store, "", format);
  if (!array.ok()) std::abort();
  std::vector<cairn::Index> cell(m.shape.size(), 0);
  if (!store->Put((*array)->ChunkKey(cell), cairn::AsBytes(chunk)).ok()) return;
  std::vector<uint8_t> out(m.chunk_spec().num_bytes());
  (*array)->Read(cairn::Box::FromShape(array_shape), out.data()).IgnoreError();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view doc = input.substr(0, nul);
  const std::string_view chunk = nul == std::string_view::npos ? "" : input.substr(nul + 1);
  auto json = cairn::ParseJson(doc, "fuzz");
  if (!json.ok()) return 0;
  for (ZarrFormat format : {ZarrFormat::kV3, ZarrFormat::kV2}) {
    auto stored = cairn::ParseArrayMetadata(format, *json);
    if (stored.ok()) {
      CheckRoundTrip(format, *stored);
      ReadChunk(format, *stored, chunk);
    }
    auto partial = cairn::MetadataFromPartial(format, *json);
    if (partial.ok()) CheckRoundTrip(format, *partial);
  }
  return 0;
}
