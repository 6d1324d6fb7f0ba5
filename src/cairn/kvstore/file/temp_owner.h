// Owners of the file driver's temporary entries, and their removal once the
// owner is gone.
//
// Every temporary name the driver makes (a value being written, a prefix
// commit's staging directory, a holding directory) is
//   <kTempMarker><16 random hex digits>-m<8 hex>p<pid>t<start ticks>
// where the `m` field is a hash of this machine (host name, boot id, PID
// namespace: util/process_identity.h) and `p`/`t` name the process. A
// process killed between creating such an entry and renaming or removing it
// leaves it behind; nothing lists it (List and ListChildren hide the marker).
//
// Sweep protocol (SweepDeadTemporaries, run by SafeRoot the first time a
// store writes below an existing directory, D2 in safe_path.h):
//   1. List the directory; keep the entries whose name holds kTempMarker.
//   2. Parse each one's owner. Skip it when the name has no owner (made by
//      an older cairn), the owner ran on another machine (nothing can be
//      proven about it), or the owner is alive (IsGoneFromThisMachine).
//   3. Remove it (a directory with everything below it). Best effort: an
//      entry that vanished meanwhile or cannot be removed is left; the
//      write that triggered the sweep goes on either way.
// A live owner's entry is never removed: its pid still runs with the same
// start time.
//
// Thread safety: all functions may be called concurrently.
#pragma once

#include <string>
#include <string_view>

namespace cairn::file_internal {

// "-m<8 hex>p<pid>t<start ticks>" for this process (computed once per
// process; a forked child computes its own).
const std::string& TempOwnerTag();

// True when temporary entry `name` (holding kTempMarker) has an owner tag of
// this machine whose process is provably gone.
bool TempOwnerIsGone(std::string_view name);

// Steps 1-3 above for directory `dirfd` (`dir_path` for nothing but
// debugging). Returns how many entries were removed.
int SweepDeadTemporaries(int dirfd, const std::string& dir_path);

}  // namespace cairn::file_internal
