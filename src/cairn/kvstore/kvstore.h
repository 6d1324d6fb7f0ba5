// KvStore: the storage interface every layer above writes and reads through.
//
// A KvStore maps keys (byte strings; '/'-separated paths by convention) to
// values. Drivers: memory (memory_kvstore.h), file (file_kvstore.h), and
// OCDBT on top of another store (ocdbt/). Open one from a URL with
// `OpenKvStore` (url.h).
//
// Keys are relative: a key that is empty, starts with '/', contains a NUL
// byte, or has a "." or ".." path component is InvalidArgument in every
// driver (`ValidateKey`).
//
// Thread safety: every method of every driver may be called concurrently from
// any number of threads. Operations on distinct keys are independent; a Get
// concurrent with a Put of the same key returns the old or the new value,
// never a mix.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cairn/util/buffer.h"
#include "cairn/result.h"

namespace cairn {

// A byte range of a value. The default is the whole value.
struct ByteRange {
  // With `suffix` false: bytes [offset, offset + length) (length nullopt = to
  // the end). With `suffix` true: the last `length` bytes (offset ignored).
  uint64_t offset = 0;
  std::optional<uint64_t> length;
  bool suffix = false;

  static ByteRange All() { return {}; }
  static ByteRange Range(uint64_t offset, uint64_t length) { return {offset, length, false}; }
  static ByteRange From(uint64_t offset) { return {offset, std::nullopt, false}; }
  static ByteRange Suffix(uint64_t length) { return {0, length, true}; }
  bool IsAll() const { return !suffix && offset == 0 && !length; }
  std::string ToString() const;
};

// Resolves `range` against a value of `size` bytes into [begin, end).
// Returns OutOfRange-style InvalidArgument when the range does not fit
// (a suffix longer than the value, or offset + length > size).
Result<std::pair<uint64_t, uint64_t>> ResolveByteRange(const ByteRange& range, uint64_t size);

struct KeyInfo {
  std::string key;
  uint64_t size = 0;
  bool operator==(const KeyInfo& o) const { return key == o.key && size == o.size; }
};

// One entry of KvStore::ListChildren: a path component directly below a
// prefix.
struct ChildEntry {
  enum class Kind {
    kKey,     // a key (a regular file in the file driver)
    kPrefix,  // keys continue below `name + "/"` (file: a directory, maybe empty)
    kOther,   // neither (file: a symlink, FIFO, socket or device); reported,
              // never followed
  };
  std::string name;  // one component: no '/'
  Kind kind = Kind::kKey;
  bool operator==(const ChildEntry& o) const { return name == o.name && kind == o.kind; }
};

// A prefix being committed (KvStore::BeginPrefixCommit). The caller writes
// the keys of the new prefix under `pending_prefix`; FinishPrefixCommit makes
// them appear under `final_prefix`, all at once where the store can.
struct PrefixCommit {
  std::string final_prefix;    // ends with '/'
  std::string pending_prefix;  // ends with '/'; == final_prefix when in_place
  // True for stores that cannot rename (the default): keys are written in
  // place and only the marker written last tells a finished prefix from an
  // unfinished one, so readers must require it.
  bool in_place = false;
};

// What a store can do, asked of the open store (KvStore::Capabilities)
// rather than guessed from its URL. Views and wrappers over another store
// (prefix views, forwarding stores) answer as their base does for what they
// forward.
struct StoreCapabilities {
  // Prefix commits are written in place (PrefixCommit::in_place): the store
  // cannot rename a prefix ("directory") into place, so the keys are written
  // where they end up and only the marker written last tells a finished
  // prefix from an unfinished one; readers must require it. True for the
  // default (object stores, OCDBT); false for stores that rename the pending
  // prefix into place (file, memory).
  bool commits_in_place = true;
  // The store has a batch writer of its own (KvStore::OpenBatchWriter): values
  // streamed as they are added and published together at Commit (OCDBT).
  // Without one, NewBatchWriter (batch_writer.h) Puts each value.
  bool batch_writer = false;
  // Reads are best asked for all at once (GetMany) rather than key by key
  // (OCDBT: one manifest read and one tree walk for all keys;
  // read_batching.h).
  bool batched_reads = false;
};

class KvBatchWriter;  // batch_writer.h

// One read of KvStore::GetMany: a key and the byte range of its value.
struct KeyRead {
  std::string key;
  ByteRange range;
  // For a whole value (range.IsAll()): one longer than this is an error
  // (ResourceExhausted naming the key), refused before or while it is
  // received, never buffered past it (as GetAtMost). 0: the store's own
  // bound only.
  uint64_t max_bytes = 0;
};

// Receives the value of reads[index] (nullopt: the key is missing). The
// bytes are valid only during the call. Called once per read, in any order,
// possibly from several threads at once; a non-OK status stops the batch
// (reads not yet delivered may be skipped) and is returned by GetMany.
using KeyReadFn = std::function<Status(size_t index, std::optional<ByteView> value)>;

// One mutation in a batch: a value to store, or nullopt to delete.
struct KvMutation {
  std::string key;
  std::optional<Buffer> value;
};

// A value written in pieces (KvStore::OpenWriter). Nothing is visible under
// the key until Commit returns OK; Commit is atomic and durable like Put.
// Destroying a writer without a successful Commit abandons the value (the
// key keeps its old value; a driver may leave an unlisted temporary file).
//
// Thread safety: one writer is used by one thread at a time.
class KvWriter {
 public:
  virtual ~KvWriter() = default;
  // Appends `bytes`. The writer does not keep a reference to them after it
  // returns. Errors: those of the driver's writes (ENOSPC, EIO, ...).
  virtual Status Append(ByteView bytes) = 0;
  // Makes the appended bytes the value of the key, durably. Call at most
  // once; Append after Commit is FailedPrecondition.
  virtual Status Commit() = 0;
  // Bytes appended so far.
  virtual uint64_t size() const = 0;
};

class KvStore {
 public:
  virtual ~KvStore() = default;

  // Reads `key`. Returns nullopt when the key is missing (not an error).
  // Errors: InvalidArgument for a bad key or a range outside the value,
  // DataLoss for corrupt stored bytes, Unavailable for I/O errors.
  virtual Result<std::optional<Buffer>> Get(std::string_view key,
                                            const ByteRange& range = {}) = 0;

  // Reads the whole value of `key` into `dst`, whose size must be the value's
  // size. Returns false when the key is missing; DataLoss when the stored
  // value has another size (dst's contents are then unspecified). Drivers
  // that can read in place (file) avoid an intermediate buffer; the default
  // is Get plus a copy.
  virtual Result<bool> GetInto(std::string_view key, MutableByteView dst);

  // Reads the whole value of `key` when it has at most `max_bytes` bytes
  // (nullopt: the key is missing). A larger value is ResourceExhausted
  // naming the key. Object stores stop receiving at the bound, so that a
  // server cannot make the reader hold more (a metadata file: the
  // small-file limit); the default is Get and a size check.
  virtual Result<std::optional<Buffer>> GetAtMost(std::string_view key, uint64_t max_bytes);

  // Reads many keys (or ranges of their values) and hands each to `fn` as
  // it arrives, so that only a few values are held at once. Drivers that
  // can batch (OCDBT: one tree descent for all keys and one read for values
  // that lie close together in a data file; file: reads in parallel)
  // override it; the default calls Get for each read in order. Errors:
  // those of Get for the first read that fails (InvalidArgument for a bad
  // key or a range outside its value), or the first error of `fn`.
  virtual Status GetMany(const std::vector<KeyRead>& reads, const KeyReadFn& fn);

  // Stores `value` under `key`, replacing any old value. Durable when it
  // returns OK (per the driver's durability protocol).
  virtual Status Put(std::string_view key, ByteView value) = 0;

  // Stores `value` only if `key` is absent. Returns true if it stored,
  // false if a value was already there (the old value is kept).
  virtual Result<bool> PutIfAbsent(std::string_view key, ByteView value) = 0;

  // Stores `value` under `key` only if the key's current value is exactly
  // `expected` (nullopt: only if the key is absent), atomically with respect
  // to every other CompareAndPut of the key (for the file driver also from
  // other processes and TensorStore; a plain Put is not serialized with it).
  // Returns true if it stored, false if the current value differs (nothing
  // written). Durable like Put.
  // Default: Unimplemented (drivers without an atomic compare-and-swap).
  virtual Result<bool> CompareAndPut(std::string_view key, std::optional<ByteView> expected,
                                     ByteView value);

  // Removes `key`; OK when it was already absent.
  virtual Status Delete(std::string_view key) = 0;

  // Lists keys starting with `prefix`, sorted bytewise, with value sizes.
  virtual Result<std::vector<KeyInfo>> List(std::string_view prefix = "") = 0;

  // Applies all mutations. Drivers that can (OCDBT) apply them atomically,
  // as one commit; the default applies them one by one, in order, stopping
  // at the first error.
  virtual Status ApplyBatch(std::vector<KvMutation> mutations);

  // Deletes every key starting with `prefix`.
  virtual Status DeletePrefix(std::string_view prefix);

  // Starts writing `key` in pieces. The default collects the pieces in
  // memory and calls Put on Commit; drivers that can stream (file) write
  // them as they come, so a large value needs no second copy in memory.
  // Errors: InvalidArgument for a bad key.
  virtual Result<std::unique_ptr<KvWriter>> OpenWriter(std::string_view key);

  // The immediate children of `prefix` ("" or ending in '/'), sorted by
  // name: one entry per distinct first path component after the prefix (see
  // ChildEntry). A name that is both a key and a prefix ("a" and "a/b" in a
  // store without directories) gives two entries, the key first. Missing
  // prefix: an empty list. The default derives the entries from List(prefix);
  // the file driver reads one directory (and also reports empty directories
  // and non-regular entries).
  // Errors: InvalidArgument for a prefix that is not "" and does not end in
  // '/' or is not a valid key followed by '/'; those of List.
  virtual Result<std::vector<ChildEntry>> ListChildren(std::string_view prefix);

  // --- Prefix commit: publishing a "directory" of keys at once. ----------
  //
  // 1. BeginPrefixCommit(final, pending): AlreadyExists if `final` already
  //    has children. Otherwise prepares `pending` (file: creates the
  //    directory durably) and returns where to write.
  // 2. The caller writes its keys under commit.pending_prefix (Put, writers).
  //    The caller chooses `pending` (a unique sibling name) and removes
  //    leftovers of earlier attempts itself (ListChildren + DeletePrefix).
  // 3. FinishPrefixCommit(commit, marker_name, marker): writes the marker key
  //    `pending + marker_name` (skipped when marker_name is empty), makes
  //    everything under `pending` durable and publishes it as `final`.
  //    NotFound when `pending` has vanished (a newer BeginPrefixCommit of the
  //    same final prefix removed it); AlreadyExists when `final` appeared.
  //
  // How each driver publishes (each documents its numbered steps):
  //   file:    fsync every file and directory under pending, rename the
  //            pending directory to final, fsync the parent directory.
  //   memory:  moves the keys under one lock (atomic).
  //   prefix:  forwards to its base with the prefix added.
  //   default: (stores without rename, e.g. object stores) in place:
  //            pending == final, and the marker is written last, only if
  //            absent (PutIfAbsent: S3 `If-None-Match: *`, GCS
  //            `ifGenerationMatch=0`), so of two commits of one prefix only
  //            one marker lands and the other gets AlreadyExists; a reader
  //            must treat a prefix without the marker as unfinished.
  // Prefixes end with '/' and are valid keys without it.
  virtual Result<PrefixCommit> BeginPrefixCommit(std::string_view final_prefix,
                                                 std::string_view pending_prefix);
  // Creates key `prefix + name` holding `value` so that no listing ever
  // shows `prefix` without it (a save's owner record: layout/orbax/
  // save_owner.h). Returns false, writing nothing, when the key exists (and,
  // on stores with directories, when the directory `prefix` exists). file:
  // the directory appears by one rename, already holding the durable key;
  // default (no directories): PutIfAbsent(prefix + name, value).
  virtual Result<bool> CreatePrefixHolding(std::string_view prefix, std::string_view name, ByteView value);
  virtual Status FinishPrefixCommit(const PrefixCommit& commit, std::string_view marker_name,
                                    ByteView marker);

  // What this store can do (StoreCapabilities). The default: commits in
  // place, no batch writer, no batched reads.
  virtual StoreCapabilities Capabilities() const { return {}; }

  // The store's own batch writer when Capabilities().batch_writer, else
  // nullptr. Callers use NewBatchWriter(store) (batch_writer.h), which falls
  // back to one Put per value. The writer keeps what it needs alive; this
  // store may be dropped before it.
  virtual std::unique_ptr<KvBatchWriter> OpenBatchWriter();

  // The store's URL ("file:///ckpt/7/", "memory://x/|ocdbt:"), for errors.
  virtual std::string url() const = 0;

  // Requests this store can usefully serve at once when they mostly wait
  // (object stores: their HTTP client's limit of requests in flight), or 0
  // when a few per core suffice (local files, memory). Layers above run up
  // to this many chunk reads or writes at once.
  virtual size_t io_concurrency() const { return 0; }

  // A hint for the reads that follow: other processes on this host read the
  // same values at about the same time (a multi-process restore whose
  // processes need the same chunks), so reads should go through the page
  // cache they share. Without it a driver may bypass the cache for large
  // reads of values that are not cached (file: O_DIRECT, no copy out of the
  // cache). Drivers over another store pass it on.
  virtual void SetReadsShared(bool shared) {}

  // "key `k` of <url>" — for error messages.
  std::string Describe(std::string_view key) const;
  // Where `key`'s value is stored, for errors about its bytes (a checksum
  // that differs): Describe(key), and for a store keeping values inside
  // files of another store (ocdbt) also that file and the byte range. Looks
  // the key up; never fails (what it cannot find, it leaves out).
  virtual std::string DescribeStored(std::string_view key) { return Describe(key); }
};

// Checks a key (see the file comment). InvalidArgument says what is wrong.
Status ValidateKey(std::string_view key);

// Checks a prefix for ListChildren / prefix commits: "" (only when
// `allow_empty`) or a valid key followed by '/'. `what` names the argument.
Status ValidatePrefix(std::string_view prefix, std::string_view what, bool allow_empty);

}  // namespace cairn
