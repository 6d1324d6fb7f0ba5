// FieldReader: a cursor over the untrusted bytes of one OCDBT object that
// turns every short read or invalid field into a DataLoss status naming the
// object, the field and the byte offset.
//
// Thread safety: a value type; one object per decoding thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "cairn/util/buffer.h"
#include "cairn/util/coding.h"
#include "cairn/status.h"

namespace cairn::ocdbt {

// Concatenates string-like parts (avoids GCC 12's -Wrestrict false positives
// on chains of std::string operator+).
template <typename... Parts>
std::string StrCat(const Parts&... parts) {
  std::string s;
  (s.append(std::string_view(parts)), ...);
  return s;
}

class FieldReader {
 public:
  // `what` names the object in errors ("b+tree node d/ab..@[0,+89)").
  FieldReader(ByteView bytes, std::string_view what) : reader_(bytes), what_(what) {}

  size_t position() const { return reader_.position(); }
  size_t remaining() const { return reader_.remaining(); }
  const std::string& what() const { return what_; }

  Status Byte(uint8_t* v, std::string_view field);
  Status LE32(uint32_t* v, std::string_view field);
  Status LE64(uint64_t* v, std::string_view field);
  Status Varint64(uint64_t* v, std::string_view field);
  Status Varint32(uint32_t* v, std::string_view field);
  // A varint32 that must be <= 65535 (path and key lengths).
  Status Varint16(uint32_t* v, std::string_view field);
  Status Bytes(uint64_t n, ByteView* out, std::string_view field);

  // DataLoss unless `count` items of at least `min_bytes_each` bytes each can
  // still be present. Call before sizing any allocation by `count`.
  Status CheckCount(uint64_t count, uint64_t min_bytes_each, std::string_view field);
  // DataLoss unless every byte was consumed.
  Status ExpectEnd();

  // "DataLoss: <what>: <message> (at byte N)".
  Status Error(std::string_view message) const;

 private:
  ByteReader reader_;
  std::string what_;
};

}  // namespace cairn::ocdbt
