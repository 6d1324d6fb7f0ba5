#include "cairn/util/coding.h"

namespace cairn {

void AppendLE16(Buffer* out, uint16_t v) { uint8_t b[2]; StoreLE16(b, v); out->append(ByteView(b, 2)); }
void AppendLE32(Buffer* out, uint32_t v) { uint8_t b[4]; StoreLE32(b, v); out->append(ByteView(b, 4)); }
void AppendLE64(Buffer* out, uint64_t v) { uint8_t b[8]; StoreLE64(b, v); out->append(ByteView(b, 8)); }

void AppendVarint64(Buffer* out, uint64_t v) {
  uint8_t b[kMaxVarint64Length];
  int n = 0;
  while (v >= 0x80) {
    b[n++] = static_cast<uint8_t>(v | 0x80);
    v >>= 7;
  }
  b[n++] = static_cast<uint8_t>(v);
  out->append(ByteView(b, n));
}

int Varint64Length(uint64_t v) {
  int n = 1;
  while (v >= 0x80) { v >>= 7; ++n; }
  return n;
}

bool ByteReader::ReadByte(uint8_t* v) {
  if (remaining() < 1) return false;
  *v = data_[pos_++];
  return true;
}
bool ByteReader::ReadLE16(uint16_t* v) {
  if (remaining() < 2) return false;
  *v = LoadLE16(data_.data() + pos_);
  pos_ += 2;
  return true;
}
bool ByteReader::ReadLE32(uint32_t* v) {
  if (remaining() < 4) return false;
  *v = LoadLE32(data_.data() + pos_);
  pos_ += 4;
  return true;
}
bool ByteReader::ReadLE64(uint64_t* v) {
  if (remaining() < 8) return false;
  *v = LoadLE64(data_.data() + pos_);
  pos_ += 8;
  return true;
}
bool ByteReader::ReadVarint64(uint64_t* v) {
  uint64_t result = 0;
  for (int i = 0; i < kMaxVarint64Length; ++i) {
    if (pos_ >= data_.size()) return false;
    uint8_t byte = data_[pos_++];
    uint64_t bits = byte & 0x7f;
    // The 10th byte may only contribute the top bit of a 64-bit value.
    if (i == 9 && bits > 1) return false;
    result |= bits << (7 * i);
    if ((byte & 0x80) == 0) {
      *v = result;
      return true;
    }
  }
  return false;  // longer than 10 bytes
}
bool ByteReader::ReadVarint32(uint32_t* v) {
  uint64_t x;
  if (!ReadVarint64(&x) || x > 0xffffffffu) return false;
  *v = static_cast<uint32_t>(x);
  return true;
}
bool ByteReader::ReadBytes(size_t n, ByteView* out) {
  if (remaining() < n) return false;
  *out = data_.subspan(pos_, n);
  pos_ += n;
  return true;
}
bool ByteReader::Skip(size_t n) {
  if (remaining() < n) return false;
  pos_ += n;
  return true;
}

}  // namespace cairn
