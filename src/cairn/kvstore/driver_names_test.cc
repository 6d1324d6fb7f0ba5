// Each driver owns its URL grammar: a driver's scheme ("s3://", "file://",
// ...) or an adapter's ("ocdbt:") is written only in that driver's folder
// (src/cairn/kvstore/<folder>/) and in the table (src/cairn/kvstore/
// drivers.cc). Everything else asks the table (url.h) or the store
// (KvStore::Capabilities), so a new driver is a new folder plus one row.
//
// Exempt, and only these: comments, tests (*_test.cc), fuzz targets
// (*_fuzz.cc) and test support (testing/ folders), which name URLs to use
// them. The scan covers src/cairn (*.cc, *.h).
//
// Also keeps docs/ARCHITECTURE.md "Adding a storage driver" true: the files
// it lists are the ones a driver touches (its folder and drivers.cc), every
// row's folder exists, drivers.cc includes nothing outside the rows'
// folders, and no CMake file lists kvstore sources (the layer globs them).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cairn/kvstore/drivers.h"
#include "cairn/util/testing/file_bytes.h"

namespace cairn {
namespace {
using ::cairn::testing::ReadFileBytes;

namespace fs = std::filesystem;

const fs::path kSource = CAIRN_SOURCE_DIR;

bool IsIdent(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// C++ source with comments blanked out (newlines kept, so line numbers
// stay), string and character literals kept.
std::string StripComments(const std::string& s) {
  std::string out = s;
  size_t i = 0;
  const size_t n = s.size();
  while (i < n) {
    const char c = s[i];
    if (c == '/' && i + 1 < n && s[i + 1] == '/') {
      while (i < n && s[i] != '\n') out[i++] = ' ';
    } else if (c == '/' && i + 1 < n && s[i + 1] == '*') {
      size_t end = s.find("*/", i + 2);
      end = end == std::string::npos ? n : end + 2;
      for (; i < end; ++i) {
        if (s[i] != '\n') out[i] = ' ';
      }
    } else if (c == '"' && i > 0 && s[i - 1] == 'R') {
      // A raw string: R"delim( ... )delim"
      size_t open = s.find('(', i);
      if (open == std::string::npos) return out;
      const std::string close = ")" + s.substr(i + 1, open - i - 1) + "\"";
      size_t end = s.find(close, open);
      i = end == std::string::npos ? n : end + close.size();
    } else if (c == '"' || (c == '\'' && !(i > 0 && std::isxdigit(static_cast<unsigned char>(s[i - 1])) != 0))) {
      // A string or character literal (not a digit separator: 1'000).
      ++i;
      while (i < n && s[i] != c && s[i] != '\n') i += s[i] == '\\' ? 2 : 1;
      ++i;
    } else {
      ++i;
    }
  }
  return out;
}

struct Name {
  std::string text;   // "s3://" or "ocdbt:"
  std::string folder;  // "s3" (below src/cairn/kvstore/)
  bool adapter = false;
};

std::vector<Name> DriverNames() {
  std::vector<Name> names;
  for (const KvStoreDriver& d : KvStoreDrivers()) {
    names.push_back({std::string(d.scheme) + "://", std::string(d.folder), false});
  }
  for (const KvStoreAdapter& a : KvStoreAdapters()) {
    names.push_back({std::string(a.scheme) + ":", std::string(a.folder), true});
  }
  return names;
}

// "<file>:<line>: `<name>`" for every use of a name in `code` (comments
// already stripped). An adapter's "ocdbt:" is not the namespace "ocdbt::".
std::vector<std::string> Uses(const std::string& code, const std::string& file, const std::vector<Name>& names,
                              const std::string& own_folder) {
  std::vector<std::string> found;
  for (const Name& name : names) {
    if (!own_folder.empty() && name.folder == own_folder) continue;
    for (size_t at = code.find(name.text); at != std::string::npos; at = code.find(name.text, at + 1)) {
      if (at > 0 && (IsIdent(code[at - 1]) || code[at - 1] == ':')) continue;
      const size_t after = at + name.text.size();
      if (name.adapter && after < code.size() && code[after] == ':') continue;
      const long line = std::count(code.begin(), code.begin() + static_cast<long>(at), '\n') + 1;
      found.push_back(file + ":" + std::to_string(line) + ": `" + name.text + "`");
    }
  }
  return found;
}

// The folder below src/cairn/kvstore/ that `rel` (relative to src/cairn/)
// lies in, or "".
std::string KvstoreFolderOf(const std::string& rel) {
  const std::string head = "kvstore/";
  if (rel.rfind(head, 0) != 0) return "";
  const size_t slash = rel.find('/', head.size());
  return slash == std::string::npos ? "" : rel.substr(head.size(), slash - head.size());
}

bool Exempt(const std::string& rel) {
  if (rel == "kvstore/drivers.cc") return true;  // the table
  if (rel.ends_with("_test.cc") || rel.ends_with("_fuzz.cc")) return true;
  return rel.find("/testing/") != std::string::npos || rel.rfind("testing/", 0) == 0;
}

TEST(DriverNames, TheScanFindsNamesInCodeButNotInComments) {
  const std::vector<Name> names = DriverNames();
  const std::string code =
      "// s3:// in a comment\n"
      "/* gs:// and |ocdbt: in a block */\n"
      "ocdbt::OcdbtOptions o;  // a namespace, not the adapter\n"
      "auto u = \"s3://\" + bucket;\n"
      "auto v = base + \"|ocdbt:\";\n"
      "auto w = R\"(file:///x)\";\n";
  const std::vector<std::string> uses = Uses(StripComments(code), "f.cc", names, "");
  EXPECT_EQ(uses, (std::vector<std::string>{"f.cc:6: `file://`", "f.cc:4: `s3://`", "f.cc:5: `ocdbt:`"}));
  // In the driver's own folder its name is allowed, others' are not.
  EXPECT_EQ(Uses(StripComments(code), "f.cc", names, "s3").size(), 2u);
}

TEST(DriverNames, OnlyInTheDriversFolderAndTheTable) {
  const std::vector<Name> names = DriverNames();
  ASSERT_FALSE(names.empty());
  const fs::path root = kSource / "src" / "cairn";
  ASSERT_TRUE(fs::is_directory(root)) << root;
  std::vector<std::string> violations;
  size_t scanned = 0;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    const std::string ext = entry.path().extension().string();
    if (ext != ".cc" && ext != ".h") continue;
    const std::string rel = fs::relative(entry.path(), root).generic_string();
    if (Exempt(rel)) continue;
    ++scanned;
    std::vector<std::string> uses =
        Uses(StripComments(ReadFileBytes(entry.path())), "src/cairn/" + rel, names, KvstoreFolderOf(rel));
    violations.insert(violations.end(), uses.begin(), uses.end());
  }
  EXPECT_GT(scanned, 100u);
  std::string all;
  for (const std::string& v : violations) all += "\n  " + v;
  EXPECT_TRUE(violations.empty()) << "driver URL schemes outside their driver's folder and the table "
                                     "(src/cairn/kvstore/drivers.cc); ask the table (kvstore/url.h), the store "
                                     "(KvStore::Capabilities) or a function of the driver's folder instead:"
                                  << all;
}

// The section "## Adding a storage driver" of docs/ARCHITECTURE.md.
std::string DriverSection() {
  const std::string doc = ReadFileBytes(kSource / "docs" / "ARCHITECTURE.md");
  const std::string title = "## Adding a storage driver";
  const size_t at = doc.find(title);
  if (at == std::string::npos) return "";
  const size_t end = doc.find("\n## ", at + title.size());
  return doc.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

TEST(DriverNames, ArchitectureListsTheFilesADriverTouches) {
  const std::string section = DriverSection();
  ASSERT_FALSE(section.empty()) << "docs/ARCHITECTURE.md has no section \"## Adding a storage driver\"";
  // The files it lists: the first backticked path of each "- `...`" item.
  std::set<std::string> listed;
  std::istringstream lines(section);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("- `", 0) != 0) continue;
    const size_t end = line.find('`', 3);
    if (end != std::string::npos) listed.insert(line.substr(3, end - 3));
  }
  EXPECT_EQ(listed, (std::set<std::string>{"src/cairn/kvstore/<driver>/", "src/cairn/kvstore/drivers.cc"}))
      << section;
  const fs::path kvstore = kSource / "src" / "cairn" / "kvstore";
  ASSERT_TRUE(fs::is_regular_file(kvstore / "drivers.cc"));

  // Every row's folder exists; the table includes headers of the rows'
  // folders only (a driver's row and its include are its whole entry).
  std::set<std::string> folders;
  for (const KvStoreDriver& d : KvStoreDrivers()) folders.insert(std::string(d.folder));
  for (const KvStoreAdapter& a : KvStoreAdapters()) folders.insert(std::string(a.folder));
  for (const std::string& f : folders) EXPECT_TRUE(fs::is_directory(kvstore / f)) << f;
  std::istringstream table(ReadFileBytes(kvstore / "drivers.cc"));
  for (std::string line; std::getline(table, line);) {
    const std::string head = "#include \"cairn/kvstore/";
    if (line.rfind(head, 0) != 0 || line == head + "drivers.h\"") continue;
    const std::string path = line.substr(head.size());
    EXPECT_EQ(folders.count(path.substr(0, path.find('/'))), 1u) << "drivers.cc includes " << line;
  }

  // No CMake file lists kvstore sources: cairn_layer globs the layer's
  // folder, so a driver's files need no CMake line.
  std::vector<fs::path> cmake_files = {kSource / "CMakeLists.txt"};
  for (const auto& e : fs::directory_iterator(kSource / "cmake")) cmake_files.push_back(e.path());
  for (const fs::path& p : cmake_files) {
    EXPECT_EQ(ReadFileBytes(p).find("src/cairn/kvstore/"), std::string::npos) << p << " lists kvstore sources";
  }
  EXPECT_NE(ReadFileBytes(kSource / "cmake" / "cairn_helpers.cmake").find("GLOB_RECURSE"), std::string::npos);
}

}  // namespace
}  // namespace cairn
