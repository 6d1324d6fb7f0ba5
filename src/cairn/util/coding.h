// Fixed-width little-endian integers and LEB128 varints on byte buffers.
//
// Decoders take untrusted bytes: they return false / an error rather than
// read past the end, and reject varints longer than 10 bytes or that
// overflow 64 bits.
//
// Thread safety: pure functions.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>

#include "cairn/util/buffer.h"

namespace cairn {

inline void StoreLE16(uint8_t* p, uint16_t v) { p[0] = v & 0xff; p[1] = v >> 8; }
inline void StoreLE32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline void StoreLE64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (8 * i));
}
inline uint16_t LoadLE16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }
inline uint32_t LoadLE32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}
inline uint64_t LoadLE64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

void AppendLE16(Buffer* out, uint16_t v);
void AppendLE32(Buffer* out, uint32_t v);
void AppendLE64(Buffer* out, uint64_t v);

// Maximum encoded length of a 64-bit varint.
inline constexpr int kMaxVarint64Length = 10;

// Appends `v` as an unsigned LEB128 varint.
void AppendVarint64(Buffer* out, uint64_t v);
// Returns the encoded length of `v`.
int Varint64Length(uint64_t v);

// A cursor over untrusted bytes. Every Read* returns false (and leaves the
// cursor in an unspecified position) when the bytes run out or are invalid.
class ByteReader {
 public:
  explicit ByteReader(ByteView bytes) : data_(bytes) {}

  size_t position() const { return pos_; }
  size_t remaining() const { return data_.size() - pos_; }
  bool empty() const { return pos_ == data_.size(); }

  bool ReadByte(uint8_t* v);
  bool ReadLE16(uint16_t* v);
  bool ReadLE32(uint32_t* v);
  bool ReadLE64(uint64_t* v);
  // Unsigned LEB128; at most 10 bytes, and the value must fit in 64 bits.
  bool ReadVarint64(uint64_t* v);
  bool ReadVarint32(uint32_t* v);
  // Borrows the next `n` bytes.
  bool ReadBytes(size_t n, ByteView* out);
  bool Skip(size_t n);

 private:
  ByteView data_;
  size_t pos_ = 0;
};

}  // namespace cairn
