#include "cairn/kvstore/s3/aws_shared_file.h"

#include <fstream>
#include <sstream>

#include "cairn/kvstore/http/environment.h"

namespace cairn::s3 {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

}  // namespace

Result<std::optional<std::map<std::string, std::string>>> AwsFileProfile(
    std::string_view text, std::string_view what, std::string_view path, std::string_view profile) {
  auto bad = [&](size_t line, std::string_view why) {
    return InvalidArgumentError(std::string(what) + " " + std::string(path) + " line " +
                                std::to_string(line) + ": " + std::string(why));
  };
  std::map<std::string, std::string> values;
  bool found = false;
  bool in_profile = false;
  bool nested = false;  // after `name =` with no value: indented lines belong to it
  size_t line_no = 0;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view raw = text.substr(pos, end - pos);
    std::string_view line = Trim(raw);
    pos = end + 1;
    ++line_no;
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    const bool indented = raw[0] == ' ' || raw[0] == '\t';
    if (nested && indented) continue;  // `s3 =` then `  addressing_style = path`
    nested = false;
    if (line[0] == '[') {
      if (line.back() != ']') return bad(line_no, "unterminated section header");
      std::string_view name = Trim(line.substr(1, line.size() - 2));
      if (name.substr(0, 8) == "profile ") name = Trim(name.substr(8));
      in_profile = name == profile;
      found = found || in_profile;
      continue;
    }
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) return bad(line_no, "expected `name = value`");
    std::string_view value = Trim(line.substr(eq + 1));
    nested = value.empty();
    if (!in_profile) continue;
    values[std::string(Trim(line.substr(0, eq)))] = std::string(value);
  }
  if (!found) return std::optional<std::map<std::string, std::string>>();
  return std::optional<std::map<std::string, std::string>>(std::move(values));
}

Result<std::optional<std::string>> ReadAwsSharedFile(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::optional<std::string>();
  constexpr size_t kMax = 1 << 20;
  std::string s(kMax + 1, '\0');  // read at most one byte past the limit
  in.read(s.data(), static_cast<std::streamsize>(s.size()));
  s.resize(static_cast<size_t>(in.gcount()));
  if (s.size() > kMax) {
    return InvalidArgumentError(std::string(what) + " " + path + " is larger than 1 MiB");
  }
  return std::optional<std::string>(std::move(s));
}

std::string AwsSharedFilePath(const char* env_var, std::string_view name) {
  std::string path = http::EnvString(env_var);
  if (!path.empty()) return path;
  std::string home = http::EnvString("HOME");
  if (home.empty()) return "";
  return home + "/.aws/" + std::string(name);
}

std::string AwsProfileName() {
  std::string profile = http::EnvString("AWS_PROFILE");
  return profile.empty() ? "default" : profile;
}

}  // namespace cairn::s3
