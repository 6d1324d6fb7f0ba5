// Lower-case hex of bytes, and the value of one hex digit: the one place
// cairn writes and reads hex (SigV4 digests, S3 multipart ETags, OCDBT
// uuids).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace cairn {

inline std::string HexLower(const unsigned char* data, size_t size) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * size);
  for (size_t i = 0; i < size; ++i) {
    out += kHex[data[i] >> 4];
    out += kHex[data[i] & 15];
  }
  return out;
}

// 0..15, or -1 when `c` is not a hex digit (either case).
inline int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace cairn
