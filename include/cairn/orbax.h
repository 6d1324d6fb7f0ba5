// Orbax checkpoints as files, for callers that drive Orbax's layout
// themselves (the Python package's orbax-checkpoint handlers, tools): an
// item opened once (its tree, its arrays' facts, whole-array reads), the
// commit protocol of a step directory, `_CHECKPOINT_METADATA`, and the
// steps under a root. Saving and restoring arrays is engine.h's.
//
// Paths are local paths or URLs (s3://, gs://, file://, memory://).
//
// Thread safety: a CheckpointItem is immutable once opened (its methods may
// run concurrently); the functions may run concurrently for different
// directories.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cairn/result.h"
#include "cairn/status.h"

namespace cairn {

// A node of an item's tree, rebuilt from `_METADATA`'s key metadata.
struct ItemTreeNode {
  enum class Kind { kLeaf, kList, kDict };
  Kind kind = Kind::kLeaf;
  // kList / kDict: the children in order, by key (list indices as text).
  std::vector<std::pair<std::string, std::unique_ptr<ItemTreeNode>>> children;
  // kLeaf: "array", "string", "none" or "unknown" (a value type cairn does
  // not read).
  std::string leaf_kind;
  std::string param;       // "array": the Orbax param name ("params.w")
  std::string value_type;  // "array", "unknown": Orbax's value type
  std::string string_value;  // "string": the value (from `_strings.json`)
};

// An array's facts as stored.
struct ItemArrayInfo {
  std::string dtype;  // "float32", ...
  std::vector<int64_t> shape;
  std::vector<int64_t> chunk_shape;  // the write (shard) shape
};

// A whole-array destination of CheckpointItem::ReadArrays.
struct WholeArrayOut {
  std::string param;
  void* data = nullptr;  // C-contiguous
  std::vector<int64_t> shape;
  int64_t item_size = 0;  // bytes per element
};

// An Orbax PyTree item, opened: its metadata files read and (OCDBT) its
// database pinned, so reads do not list or read them again.
class CheckpointItem {
 public:
  virtual ~CheckpointItem() = default;
  virtual const std::string& dir() const = 0;  // the item directory
  virtual bool use_ocdbt() const = 0;
  virtual bool use_zarr3() const = 0;
  // Result: "ocdbt+zarr3", "ocdbt+zarr2", "zarr3" or "zarr2".
  virtual std::string variant() const = 0;
  // Result: `_sharding`'s entries, param -> Orbax's JSON text.
  virtual const std::map<std::string, std::string>& shardings() const = 0;
  // Result: `_METADATA`'s custom_metadata as JSON text ("null": none).
  virtual std::string custom_metadata_json() const = 0;
  // Result: param -> the jax PRNG key implementation, for key arrays.
  virtual std::map<std::string, std::string> random_key_impls() const = 0;
  // Result: the tree. Errors: InvalidArgument for key metadata that is not
  // a tree; NotFound for a string leaf missing from `_strings.json`,
  // naming it and the item.
  virtual Result<std::unique_ptr<ItemTreeNode>> Tree() const = 0;
  // Result: each array's facts, in the order of `params`. Errors: NotFound
  // naming the param and the item; the store's errors.
  virtual Result<std::vector<ItemArrayInfo>> ArrayInfo(const std::vector<std::string>& params) const = 0;
  // Reads whole arrays into their destinations. Errors: InvalidArgument
  // ("output buffer for `<param>` does not match the stored array") when a
  // destination's shape or item size differs; ArrayInfo's; DataLoss for a
  // corrupt chunk; each naming the param and the item.
  virtual Status ReadArrays(const std::vector<WholeArrayOut>& outs) const = 0;
};

// Opens the item `path` names: an item directory, a step directory (its
// item `item_name`, else `default`, else its only item) or a checkpoint
// root (its latest finalized step). Errors: NotFound / InvalidArgument
// saying what was found at `path`; InvalidArgument / DataLoss for
// malformed metadata files, naming the file; the store's errors.
Result<std::shared_ptr<const CheckpointItem>> OpenCheckpointItem(const std::string& path,
                                                                 const std::string& item_name = "");

// The commit protocol of a directory (Orbax's): written under a temporary
// name, renamed to its final name (or, on object stores, finished by
// `commit_success.txt`).
struct PendingOrbaxCommit {
  std::string path;     // the temporary directory to write into
  std::string save_id;  // the save's id (part of the temporary name)
};

// Begins a commit of `final_path` with `save_id` ("": a new id). Result:
// where to write. Errors: AlreadyExists when `final_path` exists; the
// store's errors naming the directory.
Result<PendingOrbaxCommit> BeginOrbaxCommit(const std::string& final_path, const std::string& save_id = "");
// Result: the temporary directory of the commit `save_id` of `final_path`
// (for processes that did not begin it). Errors: InvalidArgument for a
// path that is not a directory or URL cairn opens.
Result<std::string> OrbaxPendingPath(const std::string& final_path, const std::string& save_id);
// Result: the commit in progress for `final_path`. Errors: NotFound when
// there is none; the store's errors.
Result<PendingOrbaxCommit> FindOrbaxPendingCommit(const std::string& final_path);
// Finishes the commit (rename, or `commit_success.txt`). Errors: the
// store's, naming the directory.
Status FinishOrbaxCommit(const std::string& final_path, const std::string& save_id);
// Gives up a begun commit: stops its lease and removes its temporary
// directory, best effort (errors are dropped).
void AbandonOrbaxCommit(const std::string& final_path, const std::string& save_id);

// Writes `_CHECKPOINT_METADATA` into `dir`: `handler` as the item handler
// of each of `items` (none: the directory's single item), the init time
// given and the commit time now, `custom_metadata_json` ("null": {}).
// Errors: InvalidArgument naming custom_metadata for text that is not
// JSON; the store's errors naming the file.
Status WriteOrbaxCheckpointMetadata(const std::string& dir, const std::string& handler,
                                    const std::vector<std::string>& items, int64_t init_timestamp_nsecs,
                                    const std::string& custom_metadata_json);

struct OrbaxStep {
  int64_t step = 0;
  std::string path;  // its directory
};
// Result: the finalized steps under `root` (any naming Orbax uses),
// ascending. Errors: the store's, naming the root.
Result<std::vector<OrbaxStep>> ListOrbaxSteps(const std::string& root);
// Result: the directory name of `step`: `<prefix>_<step>` (or `<step>`
// without a prefix), zero-padded to `fixed_length` digits when set.
std::string OrbaxStepName(int64_t step, const std::string& prefix, std::optional<int> fixed_length);
// Result: the time now, in nanoseconds since the epoch (Orbax's timestamps).
int64_t OrbaxNowNanos();

}  // namespace cairn
