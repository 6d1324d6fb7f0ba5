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
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cairn/util/buffer.h"
#include "cairn/util/result.h"

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

  // The store's URL ("file:///ckpt/7/", "memory://x/|ocdbt:"), for errors.
  virtual std::string url() const = 0;

  // "key `k` of <url>" — for error messages.
  std::string Describe(std::string_view key) const;
};

// Checks a key (see the file comment). InvalidArgument says what is wrong.
Status ValidateKey(std::string_view key);

}  // namespace cairn
