// What both sides of a directory transfer (dir_transfer.h, its numbered
// steps) share: the frame's layout, the receiver's bookkeeping names, and
// the checks of what a peer names. Internal to dir_transfer*.cc.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <string_view>

#include "cairn/emergency/dir_transfer.h"
#include "cairn/layout/orbax/save_owner.h"
#include "cairn/util/coding.h"

namespace cairn::emergency::transfer_detail {

inline constexpr size_t kFrameBytes = 20;
inline constexpr size_t kMaxHeaderBytes = size_t{64} << 20;
inline constexpr size_t kMaxFiles = size_t{1} << 20;
inline constexpr std::string_view kRecordFile = "cairn_transfer.json";
inline constexpr std::string_view kPartsDir = "cairn_transfer_parts";
inline constexpr std::string_view kCompleteMarker = "complete";

struct FileEntry {
  std::string path;  // relative to the directory
  uint64_t size = 0;
};

// A save's owner record (layout/orbax/save_owner.h): the writer's
// bookkeeping, never data. A published step may still hold one (a crash
// between publication and its removal, step.h 4d); copied into a receiver's
// pending directory, it would stand for the receiver's own record there.
inline bool IsOwnerRecord(std::string_view p) {
  const size_t slash = p.rfind('/');
  return p.substr(slash == std::string_view::npos ? 0 : slash + 1) == orbax::kOwnerRecordFile;
}

// Relative paths from a peer must stay inside the destination and keep
// clear of the receiver's own bookkeeping.
inline bool SafeRelativePath(const std::string& p) {
  if (p.empty() || p.front() == '/' || p.back() == '/') return false;
  if (p.rfind(kRecordFile, 0) == 0 || p.rfind(kPartsDir, 0) == 0 || IsOwnerRecord(p)) return false;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    const std::string_view part(p.data() + start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

// Fires a test hook once, when `done` reaches half of `total`.
struct HalfwayPoint {
  const std::function<void(std::string_view)>* hook;
  std::string_view point;
  uint64_t total;
  bool fired = false;
  void Update(uint64_t done) {
    if (fired || !*hook || total == 0 || 2 * done < total) return;
    fired = true;
    (*hook)(point);
  }
};

inline std::string PartsPrefix(const orbax::Location& tmp, size_t file) {
  return tmp.Key(std::string(kPartsDir) + "/" + std::to_string(file)) + "/";
}

inline std::string PartKey(const orbax::Location& tmp, size_t file, uint64_t offset, uint32_t crc) {
  char hex[9];
  std::snprintf(hex, sizeof(hex), "%08x", crc);
  return PartsPrefix(tmp, file) + std::to_string(offset) + "." + hex;
}

inline std::string CompleteKey(const orbax::Location& tmp, size_t file) {
  return PartsPrefix(tmp, file) + std::string(kCompleteMarker);
}

inline constexpr uint32_t kEndFrameIndex = 0xffffffff;

inline std::string_view AsText(const Buffer& b) { return {reinterpret_cast<const char*>(b.data()), b.size()}; }

inline bool IsEndFrame(ByteView first) { return first.size() == kFrameBytes && LoadLE32(first.data()) == kEndFrameIndex; }

}  // namespace cairn::emergency::transfer_detail
