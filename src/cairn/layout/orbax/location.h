// Location: where an Orbax checkpoint (root, step or item) lives — a KvStore
// and a key prefix inside it. Every layout and inspect function takes a
// Location; only OpenLocation turns what a user typed into one, so the
// layout runs unchanged on every store (file, memory, later object stores).
//
// A location's keys are `prefix + name`; `prefix` is "" (the whole store) or
// ends with '/'. OpenLocation roots the store at the *parent* of the named
// directory, so that the directory itself can be committed (created under a
// temporary sibling name and renamed: step.h).
//
// Thread safety: a Location is a value; its store is thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/kvstore/kvstore.h"
#include "cairn/result.h"

namespace cairn::orbax {

struct Location {
  std::shared_ptr<KvStore> store;
  std::string prefix;  // "" or ending with '/'
  // What users call the store's root in messages and results: a local
  // directory path for file locations ("/ckpt"), else the store's URL.
  std::string base;
  // The store cannot rename (object stores; StoreCapabilities::
  // commits_in_place, asked of the store when the location is opened):
  // directories are committed in place, marker last, and readers that look
  // for finished steps require the marker. Children and parents inherit it.
  bool commits_in_place = false;

  // The location `name` below this one. REQUIRES: name is one component.
  Location Child(std::string_view name) const;
  // The last component of the prefix ("" for the store's root).
  std::string Name() const;
  // The location holding this one (the store root stays the store root).
  Location Parent() const;
  // A path or URL naming the location: `base` joined with the prefix,
  // without a trailing '/' ("/ckpt/7/default", "memory://x/7").
  std::string Path() const;
  // The key of entry `name` of this location.
  std::string Key(std::string_view name) const { return prefix + std::string(name); }
  // A view of the store rooted at the prefix (keys relative to it).
  std::shared_ptr<KvStore> View() const;
};

// Opens the store behind `path_or_url` and returns the location of the
// directory it names:
//   - a local path ("ckpt", "/a/b"), absolute or relative; symlinks the user
//     names in the path itself are resolved (realpath of the longest existing
//     part), symlinks inside the checkpoint are not followed by the store;
//   - "file:///a/b" (percent-decoded as in kvstore URLs), as the path;
//   - any other one-part URL of a kvstore driver ("memory://name/path",
//     "s3://bucket/path", "gs://bucket/path"; kvstore/drivers.cc), opened
//     by the kvstore URL opener (object stores: settings from the
//     environment), percent-decoded; commits_in_place as the store answers.
// The store is rooted at the parent directory and the prefix is the last
// component + '/' (a bucket alone, "s3://bucket", is the bucket's root,
// prefix "").
// A pipeline ("...|ocdbt:") is InvalidArgument: the Orbax layout needs a
// plain base store. Nothing is created.
Result<Location> OpenLocation(std::string_view path_or_url);

// The location of key prefix `prefix` ("" or ending with '/') of an open
// store, for readers that already hold the store: base is the store's URL,
// commits_in_place as the store answers (KvStore::Capabilities).
Location LocationInStore(std::shared_ptr<KvStore> store, std::string prefix);

// The entries directly below `loc` (KvStore::ListChildren).
Result<std::vector<ChildEntry>> ListEntries(const Location& loc);
// True when `loc` has a key `name` / a sub-prefix `name` (one listing).
bool HasKey(const Location& loc, std::string_view name);
bool HasPrefix(const Location& loc, std::string_view name);
// True when anything is stored below `loc` (it "exists" as a directory).
bool Exists(const Location& loc);

// Reads key `name` of `loc`, at most `max_bytes` bytes: NotFound when absent,
// ResourceExhausted naming the key and the limit when it is larger (checked
// from the listed size before reading, and again on the bytes read),
// FailedPrecondition when the store lists it as neither key nor directory (a
// symlink, FIFO or device: never opened), the store's errors otherwise.
inline constexpr uint64_t kMaxSmallFileBytes = uint64_t{256} << 20;
Result<std::string> ReadSmallFile(const Location& loc, std::string_view name,
                                  uint64_t max_bytes = kMaxSmallFileBytes);
// The same for a `name` without '/' when the caller already listed `loc`
// (`listed`, from ListEntries): the kind comes from that listing instead of
// listing `loc` again (on an object store, one request less per file), and
// a name it does not list as a key is NotFound without a read.
Result<std::string> ReadListedSmallFile(const Location& loc, std::string_view name,
                                        const std::vector<ChildEntry>& listed,
                                        uint64_t max_bytes = kMaxSmallFileBytes);
// Stores `contents` under key `name` of `loc` with one Put (atomic and
// durable per the driver: file = temporary file, fsync, rename, fsync).
Status WriteSmallFile(const Location& loc, std::string_view name, std::string_view contents);

}  // namespace cairn::orbax
