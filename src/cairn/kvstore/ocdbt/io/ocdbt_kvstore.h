// OcdbtKvStore: an OCDBT database (TensorStore's format) stored in another
// KvStore, usually `file://…/` (URL form `<base>|ocdbt:`).
//
// Reads follow the latest manifest (or a fixed older generation), reading at
// most one B+tree node per level for a Get (GetMany reads each node on the
// paths to all its keys once). Every write (Put, Delete, PutIfAbsent,
// ApplyBatch, DeletePrefix) is one atomic commit: one new generation whose
// values and nodes are streamed into new data files of at most
// target_data_file_size bytes, then the manifest (protocol in
// ocdbt_commit.cc). Databases written here are read by TensorStore.
//
// Concurrency: commits from this object are serialized by a mutex. Commits
// from other objects, processes or TensorStore on the same database are
// detected by a conditional manifest write (the base's CompareAndPut of
// `manifest.ocdbt`, or PutIfAbsent of `manifest.%016x` for the numbered
// kind) and redone on top of the winner; a commit that loses too often fails
// with Unavailable and is never reported OK.
//
// Thread safety: all methods may be called concurrently.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "cairn/kvstore/kvstore.h"
#include "cairn/kvstore/mapped_read.h"
#include "cairn/kvstore/ocdbt/format/manifest.h"
#include "cairn/kvstore/ocdbt/io/batch_read.h"
#include "cairn/kvstore/ocdbt/io/btree_writer.h"
#include "cairn/kvstore/ocdbt/io/data_file_writer.h"
#include "cairn/kvstore/ocdbt/io/reader.h"

namespace cairn::ocdbt {

struct OcdbtOptions {
  // The config of a database created by the first commit (a random uuid is
  // drawn when it is all zero). An existing database keeps its own config.
  Config config;
  // Read this generation instead of the latest; the store is then read-only
  // (writes fail with FailedPrecondition). Reads fail with NotFound when the
  // database has no such generation.
  std::optional<uint64_t> generation;
  // Prefix of new data files under the database root.
  std::string data_prefix = "d/";
  // A data file is closed and a new one started before it would grow past
  // this many bytes (a larger single value gets a file of its own); 0 =
  // unlimited. TensorStore's and Orbax's local default: 2 GiB.
  uint64_t target_data_file_size = uint64_t{2} << 30;
  // On a base store that uploads each value whole (an object store: one
  // with io_concurrency() > 0), the batch writer (ocdbt_batch_writer.h)
  // uploads data files while values are still being added: whenever no
  // upload is under way, an open data file of at least this many bytes,
  // doubled for each file so ended before, is ended and sent (and a file
  // reaching target_data_file_size is sent at once). The environment variable CAIRN_OCDBT_UPLOAD_FILE_SIZE (bytes)
  // overrides it; 0 = every file is uploaded at the commit.
  uint64_t upload_file_size = uint64_t{16} << 20;
  // Reads never decode a node larger than the database's own
  // max_decoded_node_bytes (plus room for a few maximal entries), nor larger
  // than this, whatever the database's config says (reader.h ReadLimits).
  uint64_t max_node_read_bytes = uint64_t{256} << 20;
  // Out-of-line values of at least this many bytes start at a multiple of
  // it in their data file (zero bytes pad the gap; readers use offset and
  // length, so TensorStore reads such files): values can then be mapped
  // page-aligned (MapRange). 0 = packed back to back, as TensorStore writes.
  uint64_t value_alignment = 0;
};

// A mutation whose value bytes the caller keeps alive (and unchanged) for
// the duration of the call; nullopt deletes.
struct KvMutationView {
  std::string key;
  std::optional<ByteView> value;
};

class OcdbtKvStore : public KvStore, public MappedReadStore, public std::enable_shared_from_this<OcdbtKvStore> {
 public:
  OcdbtKvStore(std::shared_ptr<KvStore> base, OcdbtOptions options);

  // Commits in place (no rename), has a batch writer, batches reads.
  StoreCapabilities Capabilities() const override { return {true, true, true}; }
  // The streaming batch writer (ocdbt_batch_writer.h); nullptr for a store
  // not owned by a shared_ptr (which NewBatchWriter never sees).
  std::unique_ptr<KvBatchWriter> OpenBatchWriter() override;

  Result<std::optional<Buffer>> Get(std::string_view key, const ByteRange& range = {}) override;
  // One manifest read and one descent of the tree for all keys; the values
  // are read coalesced (batch_read.h) on a pool of I/O threads, from which
  // `fn` is called as each read completes.
  Status GetMany(const std::vector<KeyRead>& reads, const KeyReadFn& fn) override;
  using KvStore::GetMany;
  // Data files and nodes are read from the base store.
  void SetReadsShared(bool shared) override { base_->SetReadsShared(shared); }
  // Resolves `key` to its value's range in a data file and maps it through
  // the base store's capability (mapped_read.h); nullptr for an inline
  // value or a base without the capability. NotFound for a missing key.
  // Also "(bytes [o, +n) of <data file URL>)" of a value in a data file.
  std::string DescribeStored(std::string_view key) override;
  Result<std::shared_ptr<MappedBytes>> MapRange(std::string_view key, uint64_t offset,
                                                uint64_t length) override;
  Status Put(std::string_view key, ByteView value) override;
  Result<bool> PutIfAbsent(std::string_view key, ByteView value) override;
  // The condition is checked against the tree each commit attempt builds on.
  Result<bool> CompareAndPut(std::string_view key, std::optional<ByteView> expected,
                             ByteView value) override;
  Status Delete(std::string_view key) override;
  Result<std::vector<KeyInfo>> List(std::string_view prefix = "") override;
  // One commit; later mutations of the same key win. An empty batch commits
  // nothing.
  Status ApplyBatch(std::vector<KvMutation> mutations) override;
  // ApplyBatch over borrowed bytes: values are streamed into the data files
  // straight from the caller's memory (no copy in between).
  Status ApplyBatchViews(std::vector<KvMutationView> mutations);
  Status DeletePrefix(std::string_view prefix) override;
  // "<base>|ocdbt:", or "<base>|ocdbt:@v5/" when opened at generation 5
  // (TensorStore's URL form).
  std::string url() const override;

  // The current manifest (latest numbered one for that kind), or nullopt for
  // an empty database. Errors: DataLoss for a corrupt manifest.
  Result<std::optional<Manifest>> ReadManifest();

  // A read-only view of the generation that is the latest now: its manifest
  // is read once, here, and every read after that goes straight to the
  // tree (a fixed generation never changes). Shares this store's node
  // cache. An empty database gives a view that reads nothing.
  Result<std::shared_ptr<OcdbtKvStore>> PinLatest();

  // Reads many keys against one manifest read; result i is the value of
  // keys[i] (nullopt when absent). Each B+tree node on the paths is read
  // once; values close together in a data file are read with one request,
  // many requests in flight on a pool of I/O threads (batch_read.h).
  Result<std::vector<std::optional<SharedBytes>>> GetMany(const std::vector<std::string>& keys);

  // Commits entries whose values are already placed (inline bytes, or
  // references to existing data files relative to this database's root,
  // e.g. into a child database) as one generation; nullopt deletes.
  // REQUIRES: sorted by key, keys unique. Used by MergeOcdbtDatabases.
  Status CommitEntries(std::vector<BtreeMutation> entries);

  const std::shared_ptr<KvStore>& base() const { return base_; }
  const OcdbtOptions& options() const { return options_; }

  // The config values are written with: the database's own (from the
  // manifest this object last read or wrote for a commit, read now when it
  // has none), or the options' config for a database not created yet.
  Result<Config> ConfigForWrites();

  // Reads waiting now for a manifest read another read started (for tests
  // of the sharing; see ReadViewNow in ocdbt_kvstore.cc).
  uint64_t reads_waiting_for_manifest() const;
  // The cache of decoded B+tree nodes this store's reads share.
  const NodeCache& node_cache() const { return *node_cache_; }

 private:
  ReadObjectFn Reader() const;
  // What reads walk: the root of the generation read (nullopt: empty) and
  // the limits (with the node cache) for its database. Reads the manifest
  // unless opened at a fixed generation whose root was found before.
  struct ReadView {
    std::optional<BtreeGenerationReference> root;
    ReadLimits limits;
  };
  Result<ReadView> ReadViewNow();
  // ReadViewNow without the sharing: reads the manifest itself.
  Result<ReadView> FetchView();
  // The manifest and, for `manifest.ocdbt`, its exact bytes (what the
  // commit's CompareAndPut expects).
  struct ReadManifestResult {
    std::optional<Manifest> manifest;
    std::optional<Buffer> bytes;
  };
  Result<ReadManifestResult> ReadManifestAndBytes();
  // The generation reads use (nullopt: no such generation / empty database).
  Result<std::optional<BtreeGenerationReference>> RootOf(const std::optional<Manifest>& m);
  // The node limits for reading the database of `m` (NodeReadLimits).
  ReadLimits LimitsFor(const std::optional<Manifest>& m) const;
  // Whether a conditional write may go ahead on top of the tree `root`.
  using CommitCondition =
      std::function<Result<bool>(const std::optional<BtreeGenerationReference>& root)>;
  // REQUIRES: commit_mu_ held. Step 1 of a commit: the manifest this
  // object last read or wrote for a commit (single kind only), else read
  // now. A manifest that changed since is caught by the conditional write
  // of step 6 and read again at step 7, as TensorStore does, so a save of
  // many commits reads the manifest once rather than once per commit.
  // `cached` (optional) says whether the answer came from memory.
  Result<ReadManifestResult> ManifestForCommitLocked(bool* cached = nullptr);
  // REQUIRES: commit_mu_ held. Keeps (or drops) the manifest step 1 uses.
  void RememberLocked(const ReadManifestResult& r);
  void ForgetLocked() { known_.reset(); }
  // REQUIRES: commit_mu_ held. Commits `mutations` (sorted, unique keys).
  // Returns false (nothing committed) when `condition` fails on a retry.
  Result<bool> CommitLocked(std::vector<KvMutationView> mutations,
                            const CommitCondition& condition = nullptr);
  // REQUIRES: commit_mu_ held. Steps 3-7 of a commit of placed entries;
  // `old` is the manifest read at step 1.
  Result<bool> CommitStagedLocked(std::vector<BtreeMutation> staged, Config config,
                                  ReadManifestResult old, DataFileWriter* data,
                                  const CommitCondition& condition);
  // The config of the database `old` (a new one: the options' config with a
  // random uuid). FailedPrecondition when opened at a fixed generation.
  Result<Config> ConfigForCommit(const std::optional<Manifest>& old) const;

  std::shared_ptr<KvStore> base_;
  OcdbtOptions options_;
  std::mutex commit_mu_;
  // Guarded by commit_mu_: the manifest (nullopt: no database yet) and its
  // exact bytes as last read or written by a commit of this object.
  struct KnownManifest {
    std::optional<Manifest> manifest;
    std::optional<std::string> bytes;
  };
  std::optional<KnownManifest> known_;
  std::shared_ptr<NodeCache> node_cache_ = std::make_shared<NodeCache>();
  // Fixed generation only: the view once found (it cannot change).
  std::mutex pinned_mu_;
  std::optional<ReadView> pinned_;
  // Latest generation: concurrent ReadViewNow calls share manifest reads
  // (see ReadViewNow). Tickets count the calls; a read that started after
  // call t arrived serves call t.
  mutable std::mutex view_mu_;
  std::condition_variable view_read_done_;
  uint64_t view_tickets_ = 0;  // calls so far
  uint64_t view_served_ = 0;   // calls the last finished read serves
  bool view_reading_ = false;
  uint64_t view_waiting_ = 0;  // calls blocked in ReadViewNow
  std::shared_ptr<const Result<ReadView>> view_last_;
};

// Opens the OCDBT database stored under `base` (the factory behind
// `<base>|ocdbt:`). Nothing is read or written until the first operation.
// Errors: InvalidArgument for a null base.
Result<std::shared_ptr<KvStore>> OpenOcdbtKvStore(std::shared_ptr<KvStore> base,
                                                  const OcdbtOptions& options = {});

}  // namespace cairn::ocdbt
