// Lower-case hex of bytes, and the value of one hex digit: the one place
// cairn writes and reads hex (SigV4 digests, S3 multipart ETags, OCDBT
// uuids); percent-encoding (URIs, OCDBT URLs); and keys and paths made
// printable for error messages.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

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

// `text` for an error message: every control byte (below 0x20, and 0x7f)
// as `\xNN` (a NUL as `\x00`), everything else as is, so that the whole
// key or path is shown, and nothing reading the message as a C string cuts
// it at a NUL.
inline std::string Printable(std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
  return out;
}

// `text` with every byte percent-encoded (`%XX`, upper-case hex) except
// ASCII letters and digits and the bytes in `kept` (RFC 3986's unreserved
// "-._~" for a URI component; more where a grammar allows).
inline std::string PercentEncode(std::string_view text, std::string_view kept) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') ||
        kept.find(c) != std::string_view::npos) {
      out += c;
    } else {
      out += '%';
      out += kHex[u >> 4];
      out += kHex[u & 15];
    }
  }
  return out;
}

}  // namespace cairn
