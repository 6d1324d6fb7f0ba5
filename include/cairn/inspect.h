// Looking at stored checkpoints without loading them: what a URL holds
// (`cairn ls`), what a checkpoint is (`cairn info`), whether every stored
// byte of it reads back (`cairn verify`), and how two differ (`cairn
// diff`). Any format cairn reads: Orbax (root, step or item directory; every
// storage variant), AXLearn (step or root) and safetensors (file or set);
// `ls` and `diff` also take zarr array URLs (`...|zarr3:`) and `ls` any
// kvstore URL.
//
// Addresses are local paths or URLs (file://, memory://, s3://, gs://, and
// TensorStore pipeline URLs such as `file:///a/|ocdbt:` where stated).
//
// JSON: each ToJson returns one line of JSON (invalid UTF-8 replaced by
// U+FFFD), the form `cairn <command> --json` prints. Fields that hold JSON
// as stored (metadata) hold its text in that form; "null" when absent.
//
// Thread safety: the functions may be called concurrently; a progress
// callback is called from the calling thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cairn/result.h"
#include "cairn/status.h"

namespace cairn {

// Called now and then with (bytes done, bytes in all).
using InspectProgress = std::function<void(uint64_t done, uint64_t total)>;

// ---------------------------------------------------------------- ls

// One array, as `cairn ls` lists it.
struct ArrayListing {
  // Orbax: the param name (tree path joined with '.'), `<item>/` first when
  // the step has several PyTree items; AXLearn and safetensors: the tree
  // path; an array URL: the URL, as the zarr drivers read it.
  std::string path;
  std::string dtype;             // "float32", "bfloat16", ...
  std::vector<int64_t> shape;
  std::vector<int64_t> chunks;   // the stored chunk (shard, write) shape; safetensors: the shape
  uint64_t bytes = 0;            // stored bytes of the array (all its keys)
};

// One key of a kvstore and its size in bytes.
struct KeyListing {
  std::string key;
  uint64_t bytes = 0;
};

enum class ListingKind {
  kKeys,        // a kvstore: `keys`
  kArray,       // a zarr array: `arrays` holds it
  kCheckpoint,  // a checkpoint: `arrays` holds its arrays
};

struct Listing {
  ListingKind kind = ListingKind::kKeys;
  // kCheckpoint: "orbax", "axlearn" or "safetensors".
  std::string format;
  std::vector<KeyListing> keys;      // kKeys: every key, sorted
  std::vector<ArrayListing> arrays;  // kArray: one; kCheckpoint: Orbax in `_METADATA` order, else as stored
  // kCheckpoint (Orbax): the directory of a PyTree item that could not be
  // read, and why ("" when every item was read). `arrays` then holds only
  // the items before it.
  std::string unreadable_item;
  std::string unreadable_item_error;
  // kCheckpoint, when the address is a root of steps (Orbax or AXLearn):
  // the step listed (its latest committed) and how many committed steps the
  // root holds; nullopt and 0 for a step, an item or a file.
  std::optional<int64_t> root_step;
  size_t committed_steps = 0;
};

// What `address` holds: an Orbax checkpoint (an item holding `_METADATA`, a
// step, or a root: its latest finalized step), an AXLearn or safetensors
// checkpoint, a zarr array (a `|zarr3:`/`|zarr2:` URL, or `zarr.json` /
// `.zarray` at the URL's root), or else the keys of the kvstore URL (a bare
// OCDBT database lists as keys).
// Errors: InvalidArgument for an address that is no URL cairn opens;
// NotFound for an Orbax checkpoint without a PyTree item; the store's
// errors. When `error_context` is not null, it is set on error to what was
// being done ("opening `file:///a/`", "`/ckpt/3`"), which `cairn ls` prints
// before the error.
Result<Listing> ListAddress(const std::string& address, std::string* error_context = nullptr);

// `cairn ls --json`: kKeys [{"key", "bytes"}]; otherwise [{"path", "dtype",
// "shape", "chunks", "bytes"}], with "format" in each row for AXLearn and
// safetensors.
std::string ToJson(const Listing& listing);

// ---------------------------------------------------------------- info

struct StepListing {
  std::string name;             // the directory's name
  std::optional<int64_t> step;  // its step number
  bool finalized = false;       // false: an uncommitted `.orbax-checkpoint-tmp` directory
};

struct ItemDescription {
  std::string name;     // the directory's name ("" when the checkpoint is an item)
  std::string dir;      // its path
  std::string handler;  // from `_CHECKPOINT_METADATA` ("" when unknown)
  bool is_pytree = false;
  std::string variant;          // PyTree items: "ocdbt+zarr3", "ocdbt+zarr2", "dir+zarr3", "dir+zarr2"
  std::string custom_metadata;  // JSON text
  std::vector<ArrayListing> arrays;
  uint64_t total_bytes = 0;  // stored bytes of its arrays
  std::string error;         // why the item could not be read ("" when it could)
};

struct CheckpointDescription {
  // Every format.
  std::string path;    // the directory or file described
  // "orbax", "axlearn" or "safetensors". Orbax: see `variant`.
  std::string format;
  // Orbax: the variant of the PyTree items ("ocdbt+zarr3", ...; "mixed"
  // when they differ; "" when none was readable).
  std::string variant;
  // Orbax: "root", "step" or "item".
  std::string kind;
  std::vector<StepListing> steps;  // Orbax root: every step directory, sorted by step
  std::string root_metadata;       // Orbax root: `metadata/_ROOT_METADATA` (JSON text)
  std::string step_dir;            // Orbax: the step described (a root: its latest finalized; "" when none)
  std::string step_metadata;       // Orbax: the step's `_CHECKPOINT_METADATA` (JSON text)
  std::string step_custom_metadata;  // its "custom_metadata" (JSON text; "" when it has none)
  std::vector<ItemDescription> items;  // Orbax: the step's items, sorted
  bool ok() const;                     // false when an item could not be read
  // AXLearn and safetensors.
  std::optional<int64_t> step;  // when the format records it
  size_t arrays = 0;
  uint64_t bytes = 0;           // the arrays' logical bytes
  uint64_t stored_bytes = 0;    // their stored bytes (0 when not known)
  size_t iterator_files = 0;    // input-iterator state files beside the arrays (AXLearn)
};

// Describes the checkpoint at `address` (a path, or a file://, memory://,
// s3:// or gs:// URL). Items that cannot be read are described with
// `error` set rather than failing.
// Errors: NotFound when there is no checkpoint there; a broken AXLearn
// index names the file and what is wrong; the store's errors.
Result<CheckpointDescription> DescribeCheckpoint(const std::string& address);

// `cairn info --json`. Orbax: {"path", "kind", "format" (the variant),
// "items": [{"name", "dir", "handler", "pytree", "variant",
// "custom_metadata", "num_arrays", "total_bytes", "arrays" (as in ls),
// "error" when set}]}, with "steps" and "root_metadata" for a root and
// "step_dir" and "step_metadata" when a step was described. AXLearn and
// safetensors: {"path", "format", "arrays", "bytes", "iterator_files"},
// "step" when known, "stored_bytes" when known.
std::string ToJson(const CheckpointDescription& description);

// The tiers of an emergency run (its local directory, or its persistent
// root), from the records the emergency manager leaves there. Fields are
// JSON text as recorded; "" when absent.
struct EmergencyRunDescription {
  std::string kind;  // "local" or "persistent"
  std::string process_index, process_count, num_replicas;  // local
  std::string local_steps, uncommitted, peer_steps;       // local: its steps, tmp steps, peers' (by owner)
  std::string persistent_directory;  // local: the persistent tier it was opened with (a path)
  std::string persistent_steps;      // the persistent tier's steps
  struct LocalDirectory {
    std::string process;          // the process index
    std::string local_directory;  // its path
    std::string local_steps, peer_steps;  // what it holds ("null" when unreachable from here)
  };
  std::vector<LocalDirectory> local_directories;  // persistent: every process's local directory
  std::string json;  // the whole description as one line of JSON
};

// The emergency run `address` belongs to; nullopt when it is none (or an
// AXLearn or safetensors checkpoint, or no directory cairn opens).
// Errors: the store's errors reading the records.
Result<std::optional<EmergencyRunDescription>> DescribeEmergencyRun(const std::string& address);

// ---------------------------------------------------------------- verify

struct VerifyProblem {
  // "not_a_regular_file", "too_deep", "not_verified", "unreadable",
  // "uncommitted", "missing_metadata", "bad_metadata", "ocdbt_manifest",
  // "ocdbt_node", "missing_data_file", "truncated_data_file", "bad_array",
  // "missing_chunk", "missing_inner_chunk", "corrupt_chunk", "more";
  // "unreadable_checkpoint" for an AXLearn checkpoint that does not open.
  std::string kind;
  std::string array;    // the array's name, or ""
  std::string key;      // the key inside the item's store, or ""
  std::string file;     // the file concerned (data file, chunk file, directory), or ""
  std::string message;  // what is wrong
};

struct VerifyReport {
  std::string path;    // what was verified (the step / item / file opened)
  // "orbax", "axlearn" or "safetensors"; "" when the checkpoint did not
  // open (one "unreadable_checkpoint" problem).
  std::string format;
  size_t items = 0;         // Orbax: PyTree items verified
  size_t arrays = 0;        // arrays verified
  uint64_t chunks = 0;      // stored chunks (shards, files) read
  uint64_t bytes = 0;       // stored bytes read
  std::vector<VerifyProblem> problems;
  // Not damage (ok() stays true): an Orbax root's step that was never
  // committed ("uncommitted": an interrupted save's temporary directory,
  // which readers and managers ignore).
  std::vector<VerifyProblem> warnings;
  bool ok() const { return problems.empty(); }
};

// Reads every stored chunk of every array of the checkpoint at `address`
// and checks it (checksums, that every expected chunk exists, OCDBT data
// files, `_METADATA`, uncommitted tmp directories). Damage is reported in
// the result, naming the array, key and file.
// Errors: NotFound when there is no checkpoint at `address`; a read that
// fails for other reasons than damage (the store's errors).
Result<VerifyReport> VerifyCheckpoint(const std::string& address,
                                      const InspectProgress& progress = {});

// A problem of `report` as `cairn verify` prints it, one line: Orbax
// "<kind>: array `<array>` key `<key>` file <file>: <message>" (each part
// left out when empty); AXLearn and safetensors "<kind>: array <array>, key
// <key or ->, <file, or the path>: <message>"; a checkpoint that did not
// open "<kind>: <file>: <message>".
std::string ToString(const VerifyReport& report, const VerifyProblem& problem);

// `cairn verify --json`: {"path", "ok", "problems": [{"kind", "array",
// "key", "file", "message"}], "warnings": [the same]} and, Orbax, "items", "arrays", "chunks",
// "bytes_read"; AXLearn and safetensors "format", "arrays", "chunks",
// "bytes_checked".
std::string ToJson(const VerifyReport& report);

// ---------------------------------------------------------------- diff

struct ArrayDifference {
  std::string path;
  std::string dtype_a, dtype_b;
  std::vector<int64_t> shape_a, shape_b;
  bool values_compared = false;  // false when the shapes differ
  uint64_t num_different = 0;    // elements (parts, for complex) that differ
  uint64_t nan_mismatches = 0;   // of them, a NaN against a number
  double max_abs = 0;            // max |a - b| (infinite: written as null in JSON)
  double max_rel = 0;            // max |a - b| / max(|a|, |b|)
  bool same = false;             // dtypes (unless a tolerance was given), shapes and values agree
};

struct DiffReport {
  std::string a, b;                // the two addresses
  std::string format_a, format_b;  // "ocdbt+zarr3", "axlearn", "safetensors", ..., "zarr3"/"zarr2" for an array URL
  std::vector<std::string> only_in_a, only_in_b;  // array paths on one side only
  std::vector<ArrayDifference> arrays;       // every path on both sides, sorted
  std::vector<std::string> strings_differ;   // string leaves whose values differ
  // Nothing differs: same paths, dtypes, shapes and values (even when a
  // tolerance was given).
  bool identical = false;
  // Same paths and shapes, and every value within the tolerance (dtypes
  // may differ when one was given: a bf16 cast of f32). `cairn diff` exits
  // 0 on it. Without a tolerance, the same as `identical`.
  bool equal_within_tolerance = false;
};

struct DiffOptions {
  // Values a (of A) and b (of B) count as equal when |a - b| <= atol +
  // rtol * |b| (numpy.isclose). With either set, arrays of different dtypes
  // whose values agree count as the same.
  double atol = 0;
  double rtol = 0;
  // Which arrays to compare, as `cairn convert` selects and renames them
  // (the same matcher): A's arrays whose path ('.'-joined) matches one of
  // `include` (fnmatch globs; all when empty), with a leading OLD of their
  // path replaced by NEW (the first matching {OLD, NEW}), are compared with
  // B's arrays of that path; B's arrays matching an include are kept too.
  std::vector<std::string> include;
  std::vector<std::pair<std::string, std::string>> renames;
  InspectProgress progress;  // may be empty
};

// Compares two checkpoints or arrays of any formats (addresses: paths,
// URLs, zarr array URLs), streaming chunk by chunk: arrays are matched by
// path (`params/w` of AXLearn meets `params.w` of Orbax).
// Errors: NotFound or InvalidArgument when a side opens as nothing cairn
// reads ("diff: A" / "diff: B" first); DataLoss naming the array and key
// when a read fails; ResourceExhausted for an unchunked array too large to
// compare.
Result<DiffReport> Diff(const std::string& a, const std::string& b, const DiffOptions& options = {});

// `cairn diff --json`: {"a", "b", "format_a", "format_b", "identical",
// "equal_within_tolerance", "only_in_a", "only_in_b", "strings_differ", "arrays": [{"path", "same",
// "dtype_a", "dtype_b", "shape_a", "shape_b", "values_compared",
// "num_different", "nan_mismatches", "max_abs", "max_rel"}]}.
std::string ToJson(const DiffReport& report);

}  // namespace cairn
