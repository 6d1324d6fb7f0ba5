// libFuzzer target for every OCDBT decoder: manifest, B+tree node,
// version-tree node and data-file table.
//
// The input is decoded as a whole manifest and as a data-file table; then
// every embedded object header (a B+tree or version-tree magic followed by a
// length that fits in the rest of the input) is decoded as that node, which
// lets real data files (values and nodes packed together) serve as seeds.
// Each envelope is decoded twice: as given, and with its CRC-32C recomputed,
// so that mutations reach the body decoders instead of stopping at the
// checksum.
// Decoders must return an error, never crash, assert, leak or allocate
// without bound; any other outcome is a finding.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "cairn/kvstore/ocdbt/format/btree.h"
#include "cairn/kvstore/ocdbt/format/data_file.h"
#include "cairn/kvstore/ocdbt/format/manifest.h"
#include "cairn/kvstore/ocdbt/format/version_tree.h"
#include "cairn/util/crc32c.h"

namespace {

uint32_t LoadBe32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
}
uint64_t LoadLe64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// A copy of `object` whose last 4 bytes are the CRC-32C of the rest.
std::vector<uint8_t> WithFixedCrc(cairn::ByteView object) {
  std::vector<uint8_t> copy(object.begin(), object.end());
  if (copy.size() >= 4) {
    uint32_t crc = cairn::Crc32c(cairn::ByteView(copy.data(), copy.size() - 4));
    for (int i = 0; i < 4; ++i) copy[copy.size() - 4 + i] = static_cast<uint8_t>(crc >> (8 * i));
  }
  return copy;
}

constexpr uint32_t kBtreeMagic = 0x0CDB20DE;
constexpr uint32_t kVersionMagic = 0x0CDB1234;

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cairn;
  using namespace cairn::ocdbt;
  ByteView all(data, size);
  (void)DecodeManifest(all, "fuzz manifest");
  {
    std::vector<uint8_t> fixed = WithFixedCrc(all);
    (void)DecodeManifest(ByteView(fixed.data(), fixed.size()), "fuzz manifest (crc fixed)");
  }
  {
    FieldReader r(all, "fuzz data file table");
    (void)DecodeDataFileTable(r, "");
    FieldReader r2(all, "fuzz data file table with transitive path");
    (void)DecodeDataFileTable(r2, "ocdbt.process_0/");
  }
  for (size_t p = 0; p + 16 <= size; ++p) {
    uint32_t magic = LoadBe32(data + p);
    if (magic != kBtreeMagic && magic != kVersionMagic) continue;
    uint64_t length = LoadLe64(data + p + 4);
    if (length > size - p) continue;
    std::vector<uint8_t> fixed = WithFixedCrc(ByteView(data + p, static_cast<size_t>(length)));
    for (ByteView object : {ByteView(data + p, static_cast<size_t>(length)),
                            ByteView(fixed.data(), fixed.size())}) {
      if (magic == kBtreeMagic) {
        (void)DecodeBtreeNode(object, "", "fuzz b+tree node");
      } else {
        for (uint8_t arity : {uint8_t{1}, uint8_t{4}}) {
          (void)DecodeVersionTreeNode(object, arity, "", "fuzz version node");
        }
      }
    }
  }
  return 0;
}
