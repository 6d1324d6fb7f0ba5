// crashfs's power-loss model (test-only; docs/TESTING.md, "Crash campaign").
//
// A durable shadow, kept outside the tree under test:
//   <shadow>/files/<key>  a regular file's content at its last fsync/fdatasync
//   <shadow>/dirs/<key>   a directory's entries at its last fsync, one a line:
//                         "<type> <key> <name>" (type d, f or l)
//   <shadow>/links/<key>  a symbolic link's target
//   <shadow>/root         the key of the tree's root directory
// A key names one file for its whole life: device, inode and birth time
// (statx), so a reused inode number is a different key.
//
// Power loss keeps exactly what the shadow holds: starting from the root's
// durable entries, each file gets the content of its last fsync (empty if it
// was never synced), each directory the entries of its last fsync (none if it
// was never synced), and everything else vanishes. What existed when the run
// started counts as durable (SnapshotTree).
//
// Every function here uses raw system calls only, so it is safe inside the
// LD_PRELOAD shim's interposers (no recursion into them).
#pragma once

#include <string>

namespace crashfs {

// The key of the file `name` in directory `dirfd` (AT_FDCWD for a path; ""
// for `dirfd` itself), without following a last symbolic link. Empty on
// error.
std::string KeyOf(int dirfd, const char* name);

// Records the content of regular file `fd` as durable. Returns 0 or -errno.
int RecordFile(const std::string& shadow, int fd);
// Records the entries of directory `fd` as durable. Returns 0 or -errno.
int RecordDir(const std::string& shadow, int fd);
// Records the whole tree below `root` (files, directories, links) as
// durable and names `root` the root. Returns 0 or -errno.
int SnapshotTree(const std::string& shadow, const std::string& root);
// Builds at `dest` (which must not exist) the tree a power loss leaves.
// Returns 0 or -errno; `error` says what failed.
int Rebuild(const std::string& shadow, const std::string& dest, std::string* error);

}  // namespace crashfs
