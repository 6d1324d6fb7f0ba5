#include "cairn/kvstore/s3/s3_xml.h"

#include <cstdint>

namespace cairn::s3 {
namespace {

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xF0 | (cp >> 18));
    *out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

std::vector<std::string_view> XmlElements(std::string_view xml, std::string_view tag) {
  std::vector<std::string_view> out;
  const std::string open = "<" + std::string(tag) + ">";
  const std::string close = "</" + std::string(tag) + ">";
  size_t pos = 0;
  while (true) {
    size_t start = xml.find(open, pos);
    if (start == std::string_view::npos) break;
    start += open.size();
    size_t end = xml.find(close, start);
    if (end == std::string_view::npos) break;
    out.push_back(xml.substr(start, end - start));
    pos = end + close.size();
  }
  return out;
}

std::optional<std::string> XmlText(std::string_view xml, std::string_view tag) {
  const std::string open = "<" + std::string(tag) + ">";
  const std::string close = "</" + std::string(tag) + ">";
  size_t start = xml.find(open);
  if (start == std::string_view::npos) return std::nullopt;
  start += open.size();
  size_t end = xml.find(close, start);
  if (end == std::string_view::npos) return std::nullopt;
  return XmlDecode(xml.substr(start, end - start));
}

std::optional<std::string> XmlDecode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    size_t semi = s.find(';', i);
    if (semi == std::string_view::npos || semi - i > 12) return std::nullopt;
    std::string_view ent = s.substr(i + 1, semi - i - 1);
    if (ent == "amp") out += '&';
    else if (ent == "lt") out += '<';
    else if (ent == "gt") out += '>';
    else if (ent == "quot") out += '"';
    else if (ent == "apos") out += '\'';
    else if (ent.size() >= 2 && ent[0] == '#') {
      bool hex = ent[1] == 'x' || ent[1] == 'X';
      std::string_view digits = ent.substr(hex ? 2 : 1);
      if (digits.empty()) return std::nullopt;
      uint32_t cp = 0;
      for (char c : digits) {
        int d = (c >= '0' && c <= '9') ? c - '0'
                : (hex && c >= 'a' && c <= 'f') ? c - 'a' + 10
                : (hex && c >= 'A' && c <= 'F') ? c - 'A' + 10
                                                : -1;
        if (d < 0) return std::nullopt;
        cp = cp * (hex ? 16 : 10) + static_cast<uint32_t>(d);
        if (cp > 0x10FFFF) return std::nullopt;
      }
      if (cp == 0) return std::nullopt;
      AppendUtf8(cp, &out);
    } else {
      return std::nullopt;
    }
    i = semi;
  }
  return out;
}

std::string XmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace cairn::s3
