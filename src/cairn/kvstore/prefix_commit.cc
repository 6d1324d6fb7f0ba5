// The default ListChildren and prefix commit of KvStore (kvstore.h), for
// stores that have neither directories nor rename (object stores, OCDBT).
//
// Default prefix commit protocol (in place, marker last):
//   1. BeginPrefixCommit: AlreadyExists when `final` has any key. The pending
//      prefix is `final` itself (PrefixCommit::in_place): keys are written
//      where they will stay.
//   2. The caller writes its keys under `final` (each Put durable).
//   3. FinishPrefixCommit: writes the marker `final + marker_name` with one
//      PutIfAbsent, after every other key: AlreadyExists when another
//      commit's marker is there. A reader that finds the marker finds every
//      key; a prefix without the marker is unfinished.
// There is no atomic switch: a reader that does not require the marker may
// see an unfinished prefix, and a straggling writer can still add keys to
// it. Drivers that can rename (file, memory) override all of this.
#include "cairn/kvstore/child_entries.h"
#include "cairn/kvstore/kvstore.h"
#include "cairn/util/hex.h"

namespace cairn {

Status ValidatePrefix(std::string_view prefix, std::string_view what, bool allow_empty) {
  if (prefix.empty()) {
    if (allow_empty) return Status::OK();
    return InvalidArgumentError(std::string(what) + " must not be empty");
  }
  if (prefix.back() != '/') {
    return InvalidArgumentError(std::string(what) + " `" + Printable(prefix) + "` must end with '/'");
  }
  return ValidateKey(prefix.substr(0, prefix.size() - 1))
      .Annotate(std::string(what) + " `" + Printable(prefix) + "`");
}

Result<std::vector<ChildEntry>> KvStore::ListChildren(std::string_view prefix) {
  CAIRN_RETURN_IF_ERROR(ValidatePrefix(prefix, "ListChildren prefix", /*allow_empty=*/true));
  CAIRN_ASSIGN_OR_RETURN(std::vector<KeyInfo> keys, List(prefix));
  ChildEntries children(prefix);
  for (const KeyInfo& k : keys) children.AddKey(k.key);
  return std::move(children).Sorted();
}

Result<PrefixCommit> KvStore::BeginPrefixCommit(std::string_view final_prefix,
                                                std::string_view pending_prefix) {
  CAIRN_RETURN_IF_ERROR(ValidatePrefix(final_prefix, "final prefix", /*allow_empty=*/false));
  CAIRN_RETURN_IF_ERROR(ValidatePrefix(pending_prefix, "pending prefix", /*allow_empty=*/false));
  CAIRN_ASSIGN_OR_RETURN(std::vector<KeyInfo> existing, List(final_prefix));
  if (!existing.empty()) {
    return AlreadyExistsError("committing " + Describe(final_prefix) + ": it already holds keys");
  }
  return PrefixCommit{std::string(final_prefix), std::string(final_prefix), /*in_place=*/true};
}

Status KvStore::FinishPrefixCommit(const PrefixCommit& commit, std::string_view marker_name,
                                   ByteView marker) {
  if (!commit.in_place || commit.pending_prefix != commit.final_prefix) {
    return InvalidArgumentError("committing " + Describe(commit.final_prefix) +
                                ": this store commits in place, but the pending prefix is " +
                                commit.pending_prefix);
  }
  if (marker_name.empty()) return Status::OK();
  const std::string key = commit.final_prefix + std::string(marker_name);
  Result<bool> stored = PutIfAbsent(key, marker);
  if (!stored.ok()) return stored.status().Annotate("writing the commit marker of " + Describe(commit.final_prefix));
  if (!*stored) {
    return AlreadyExistsError("committing " + Describe(commit.final_prefix) +
                              ": another commit wrote its marker first (" + Describe(key) + ")");
  }
  return Status::OK();
}

Result<bool> KvStore::CreatePrefixHolding(std::string_view prefix, std::string_view name, ByteView value) {
  CAIRN_RETURN_IF_ERROR(ValidatePrefix(prefix, "prefix", /*allow_empty=*/false));
  return PutIfAbsent(std::string(prefix) + std::string(name), value);
}

}  // namespace cairn
