#include "cairn/kvstore/ocdbt/io/data_file_writer.h"

#include <random>

namespace cairn::ocdbt {

DataFileWriter::DataFileWriter(std::string_view prefix) {
  std::random_device rd;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string name(prefix);
  for (int i = 0; i < 4; ++i) {
    uint32_t v = rd();
    for (int j = 0; j < 8; ++j) name.push_back(kHex[(v >> (4 * j)) & 0xf]);
  }
  id_.relative_path = std::move(name);
}

IndirectDataReference DataFileWriter::Append(ByteView bytes) {
  IndirectDataReference ref{id_, data_.size(), bytes.size()};
  data_.append(bytes);
  return ref;
}

}  // namespace cairn::ocdbt
