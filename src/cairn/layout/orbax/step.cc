// Implements the commit protocol and step discovery documented (numbered
// steps) at the top of step.h, through the KvStore of a Location only.
#include "cairn/layout/orbax/step.h"

#include <sys/random.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <map>

#include "cairn/layout/orbax/metadata_files.h"
#include "cairn/util/thread_pool.h"

namespace cairn::orbax {
namespace {

// The children of each of `names` below `root`, in order. On a store that
// serves many requests at once (an object store: every listing a request)
// up to 16 listings run together; elsewhere one after another.
std::vector<Result<std::vector<ChildEntry>>> ListChildrenOfEach(const Location& root,
                                                                const std::vector<std::string>& names) {
  std::vector<Result<std::vector<ChildEntry>>> out(names.size(), InternalError("not listed"));
  auto list = [&](size_t i) {
    const Location child = root.Child(names[i]);
    out[i] = child.store->ListChildren(child.prefix);
  };
  const size_t threads = std::min<size_t>({root.store->io_concurrency(), names.size(), 16});
  if (threads < 2) {
    for (size_t i = 0; i < names.size(); ++i) list(i);
    return out;
  }
  ThreadPool pool(threads);
  TaskGroup group(pool);
  for (size_t i = 0; i < names.size(); ++i) {
    group.Run([&, i] {
      list(i);
      return Status::OK();
    });
  }
  group.Wait().IgnoreError();  // each listing's result is in `out`
  return out;
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace
std::string StepName(int64_t step, const StepNameFormat& format) {
  std::string num = std::to_string(step);
  if (format.fixed_length && static_cast<int>(num.size()) < *format.fixed_length) {
    num.insert(0, *format.fixed_length - num.size(), '0');
  }
  return format.prefix.empty() ? num : format.prefix + "_" + num;
}

std::optional<int64_t> ParseStepName(std::string_view name, const StepNameFormat& format) {
  if (!format.prefix.empty()) {
    std::string want = format.prefix + "_";
    if (name.substr(0, want.size()) != want) return std::nullopt;
    name.remove_prefix(want.size());
  }
  if (!AllDigits(name) || name.size() > 18) return std::nullopt;
  if (format.fixed_length) {
    if (static_cast<int>(name.size()) < *format.fixed_length) return std::nullopt;
    if (static_cast<int>(name.size()) > *format.fixed_length && name[0] == '0') return std::nullopt;
  } else if (name.size() > 1 && name[0] == '0') {
    return std::nullopt;
  }
  return std::stoll(std::string(name));
}

bool IsTmpName(std::string_view name) { return name.find(kTmpSuffix) != std::string_view::npos; }

Result<std::vector<StepInfo>> ListSteps(const Location& root, const StepNameFormat& format,
                                        bool require_commit_file) {
  if (!Exists(root)) return NotFoundError("checkpoint root " + root.Path() + " is not a directory");
  CAIRN_ASSIGN_OR_RETURN(std::vector<ChildEntry> entries, ListEntries(root));
  std::vector<StepInfo> out;
  std::vector<std::string> to_check;  // names whose commit file decides
  for (const ChildEntry& e : entries) {
    if (e.kind != ChildEntry::Kind::kPrefix || IsTmpName(e.name)) continue;
    std::optional<int64_t> step = ParseStepName(e.name, format);
    if (!step) continue;
    out.push_back({*step, root.Child(e.name)});
    to_check.push_back(e.name);
  }
  if (require_commit_file || root.commits_in_place) {
    const std::vector<Result<std::vector<ChildEntry>>> listed = ListChildrenOfEach(root, to_check);
    std::vector<StepInfo> committed;
    for (size_t i = 0; i < out.size(); ++i) {
      const auto& c = listed[i];
      if (c.ok() && std::any_of(c->begin(), c->end(), [](const ChildEntry& e) {
            return e.kind == ChildEntry::Kind::kKey && e.name == kCommitSuccessFile;
          })) {
        committed.push_back(std::move(out[i]));
      }
    }
    out = std::move(committed);
  }
  std::sort(out.begin(), out.end(), [](const StepInfo& a, const StepInfo& b) { return a.step < b.step; });
  return out;
}

Result<std::vector<StepInfo>> DiscoverSteps(const Location& root) {
  if (!Exists(root)) return NotFoundError("checkpoint root " + root.Path() + " is not a directory");
  CAIRN_ASSIGN_OR_RETURN(std::vector<ChildEntry> entries, ListEntries(root));
  std::vector<std::string> names;  // what could be steps, each listed below
  std::vector<int64_t> numbers;
  for (const ChildEntry& entry : entries) {
    const std::string& name = entry.name;
    if (entry.kind != ChildEntry::Kind::kPrefix || IsTmpName(name)) continue;
    size_t digits = name.size();
    while (digits > 0 && name[digits - 1] >= '0' && name[digits - 1] <= '9') --digits;
    if (digits == name.size()) continue;
    if (digits > 0 && (digits < 2 || name[digits - 1] != '_')) continue;
    std::string_view num = std::string_view(name).substr(digits);
    if (num.size() > 18) continue;
    names.push_back(name);
    numbers.push_back(std::stoll(std::string(num)));
  }
  const std::vector<Result<std::vector<ChildEntry>>> listed = ListChildrenOfEach(root, names);
  std::map<int64_t, Location> found;
  for (size_t n = 0; n < names.size(); ++n) {
    Location step = root.Child(names[n]);
    const auto& children = listed[n];
    if (!children.ok()) continue;
    bool looks_like_step = false;
    bool has_marker = false;
    for (const ChildEntry& c : *children) {
      if (c.kind == ChildEntry::Kind::kKey && (c.name == kCheckpointMetadataFile || c.name == kCommitSuccessFile)) {
        looks_like_step = true;
      }
      if (c.kind == ChildEntry::Kind::kKey && c.name == kCommitSuccessFile) has_marker = true;
    }
    // Written in place (no rename): unfinished until its marker is there.
    if (root.commits_in_place && !has_marker) continue;
    for (size_t i = 0; !looks_like_step && i < children->size(); ++i) {
      const ChildEntry& c = (*children)[i];
      if (c.kind == ChildEntry::Kind::kPrefix && HasKey(step.Child(c.name), kTreeMetadataFile)) {
        looks_like_step = true;
      }
    }
    if (!looks_like_step) continue;
    found.emplace(numbers[n], std::move(step));
  }
  std::vector<StepInfo> out;
  for (auto& [step, loc] : found) out.push_back({step, loc});
  return out;
}

std::string NewSaveId() {
  uint8_t bytes[8] = {};
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = ::getrandom(bytes + got, sizeof(bytes) - got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    got += static_cast<size_t>(n);
  }
  if (got < sizeof(bytes)) {  // no getrandom: the clock still differs per save
    uint64_t t = static_cast<uint64_t>(NowNanos());
    for (size_t i = 0; i < sizeof(bytes); ++i) bytes[i] ^= static_cast<uint8_t>(t >> (8 * i));
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id;
  for (uint8_t b : bytes) {
    id += kHex[b >> 4];
    id += kHex[b & 15];
  }
  return id;
}

std::string TmpName(std::string_view final_name, std::string_view save_id) {
  return std::string(final_name) + std::string(kTmpSuffix) + "-" + std::string(save_id);
}

int64_t NowNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace cairn::orbax
