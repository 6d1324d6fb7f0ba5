#include "cairn/layout/orbax/py_json.h"

#include <cstdint>
#include <cstdio>

namespace cairn::orbax {
namespace {

void AppendU16(uint32_t u, std::string* out) {
  char buf[8];
  std::snprintf(buf, sizeof(buf), "\\u%04x", u);
  out->append(buf);
}

// Decodes one UTF-8 code point at s[i]; returns its length, or 0 if invalid.
size_t DecodeUtf8(std::string_view s, size_t i, uint32_t* cp) {
  auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  uint8_t c = b(i);
  size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  uint32_t v = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
  for (size_t k = 1; k < len; ++k) {
    if ((b(i + k) & 0xc0) != 0x80) return 0;
    v = (v << 6) | (b(i + k) & 0x3f);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (v < kMin[len] || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
  *cp = v;
  return len;
}

void Dump(const Json& j, std::string* out) {
  switch (j.type()) {
    case Json::value_t::object: {
      out->push_back('{');
      bool first = true;
      for (const auto& [k, v] : j.items()) {
        if (!first) out->append(", ");
        first = false;
        out->append(PyJsonString(k));
        out->append(": ");
        Dump(v, out);
      }
      out->push_back('}');
      return;
    }
    case Json::value_t::array: {
      out->push_back('[');
      bool first = true;
      for (const Json& v : j) {
        if (!first) out->append(", ");
        first = false;
        Dump(v, out);
      }
      out->push_back(']');
      return;
    }
    case Json::value_t::string:
      out->append(PyJsonString(j.get_ref<const std::string&>()));
      return;
    default:
      out->append(j.dump());
      return;
  }
}

}  // namespace

std::string PyJsonString(std::string_view s) {
  std::string out = "\"";
  for (size_t i = 0; i < s.size();) {
    char c = s[i];
    switch (c) {
      case '"': out.append("\\\""); ++i; continue;
      case '\\': out.append("\\\\"); ++i; continue;
      case '\n': out.append("\\n"); ++i; continue;
      case '\r': out.append("\\r"); ++i; continue;
      case '\t': out.append("\\t"); ++i; continue;
      case '\b': out.append("\\b"); ++i; continue;
      case '\f': out.append("\\f"); ++i; continue;
      default: break;
    }
    uint8_t u = static_cast<uint8_t>(c);
    if (u >= 0x20 && u < 0x7f) {
      out.push_back(c);
      ++i;
      continue;
    }
    uint32_t cp = 0;
    size_t len = DecodeUtf8(s, i, &cp);
    if (len == 0) {
      AppendU16(u, &out);
      ++i;
      continue;
    }
    if (cp >= 0x10000) {
      cp -= 0x10000;
      AppendU16(0xd800 + (cp >> 10), &out);
      AppendU16(0xdc00 + (cp & 0x3ff), &out);
    } else {
      AppendU16(cp, &out);
    }
    i += len;
  }
  out.push_back('"');
  return out;
}

std::string PyJsonDumps(const Json& j) {
  std::string out;
  Dump(j, &out);
  return out;
}

}  // namespace cairn::orbax
