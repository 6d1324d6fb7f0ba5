// The receiving side of the transfer protocol of dir_transfer.h (numbered
// steps there); the sending side is in dir_transfer.cc.
#include <charconv>
#include <map>
#include <vector>

#include "cairn/emergency/dir_transfer.h"
#include "cairn/emergency/dir_transfer_frames.h"
#include "cairn/layout/orbax/metadata_files.h"
#include "cairn/layout/orbax/step.h"
#include "cairn/util/coding.h"
#include "cairn/util/crc32c.h"
#include "cairn/util/json.h"

namespace cairn::emergency {
using namespace transfer_detail;
namespace {

// Steps 2, 4, 5: a receiver that stops answers {"abort": error} (best
// effort), then discards what its sender still sends, up to the end frame
// the sender answers an abort with (at most `most` messages, each within
// `timeout`): so nothing of this transfer is left for the next one under
// the tag. Returns `status`.
Status Abort(PeerTransport& transport, int sender, int tag, Status status, uint64_t most,
             PeerTransport::Duration timeout, size_t max_bytes) {
  const std::string text = DumpJson({{"abort", std::string(status.message())}});
  if (!transport.Send(sender, tag + PeerTransport::kMaxTransferTag, AsBytes(text), timeout).ok()) return status;
  bool ended = false;
  auto discard = [&](ByteView first, ByteView) {
    ended = IsEndFrame(first);
    return Status::OK();
  };
  for (uint64_t n = 0; n < most && !ended; ++n) {
    if (!transport.ReceiveParts(sender, tag, max_bytes, timeout, discard).ok()) break;
  }
  return status;
}

// Step 2 for one file cut short: the bytes its parts hold from offset 0,
// each part `piece_bytes` long (the last may be shorter) and matching its
// crc32c. Parts past that are removed. Fills `keys` with the kept parts.
// With `data_key`, the parts are empty markers of pieces written in place
// into that file, and each is checked against the file's bytes there.
Result<uint64_t> KeptParts(const orbax::Location& tmp, size_t file, const FileEntry& f, uint64_t piece_bytes,
                           const std::string* data_key, std::vector<std::string>& keys) {
  const std::string prefix = PartsPrefix(tmp, file);
  CAIRN_ASSIGN_OR_RETURN(std::vector<KeyInfo> listed, tmp.store->List(prefix));
  std::map<uint64_t, std::pair<std::string, uint32_t>> parts;  // offset -> key, crc
  for (const KeyInfo& k : listed) {
    const std::string name = k.key.substr(prefix.size());
    const size_t dot = name.find('.');
    uint64_t offset = 0;
    uint32_t crc = 0;
    bool ok = dot != std::string::npos &&
              std::from_chars(name.data(), name.data() + dot, offset).ec == std::errc() &&
              std::from_chars(name.data() + dot + 1, name.data() + name.size(), crc, 16).ec == std::errc();
    if (!ok || !parts.emplace(offset, std::make_pair(k.key, crc)).second) {
      CAIRN_RETURN_IF_ERROR(tmp.store->Delete(k.key));
    }
  }
  uint64_t have = 0;
  for (auto& [offset, part] : parts) {
    const uint64_t want = std::min(piece_bytes, f.size - std::min(f.size, offset));
    bool keep = offset == have && want > 0;
    if (keep && data_key != nullptr) {
      auto data = tmp.store->Get(*data_key, ByteRange::Range(offset, want));
      // A file cut short (or gone) is no error: the piece is fetched again.
      keep = data.ok() && *data && (*data)->size() == want && Crc32c((*data)->view()) == part.second;
    } else if (keep) {
      CAIRN_ASSIGN_OR_RETURN(std::optional<Buffer> data, tmp.store->Get(part.first));
      keep = data && data->size() == want && Crc32c(data->view()) == part.second;
    }
    if (!keep) {
      CAIRN_RETURN_IF_ERROR(tmp.store->Delete(part.first));
      continue;
    }
    keys.push_back(part.first);
    have += want;
  }
  return have;
}

// Step 4: writes `key` from its parts, durably, and removes the parts.
Status Assemble(const orbax::Location& tmp, size_t file, const std::string& key,
                const std::vector<std::string>& parts, const TransferOptions& options) {
  CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<KvWriter> writer, tmp.store->OpenWriter(key));
  for (const std::string& part : parts) {
    options.budget->Acquire(options.piece_bytes);
    engine::BudgetHold hold(options.budget, options.piece_bytes);
    CAIRN_ASSIGN_OR_RETURN(std::optional<Buffer> data, tmp.store->Get(part));
    if (!data) return DataLossError(tmp.store->Describe(part) + " vanished while assembling");
    CAIRN_RETURN_IF_ERROR(writer->Append(data->view()));
  }
  CAIRN_RETURN_IF_ERROR(writer->Commit());
  return tmp.store->DeletePrefix(PartsPrefix(tmp, file));
}

// Step 4: receives, checks and writes the pieces of every file not held
// yet. Counts the pieces the transport handed over in `pieces_taken`, and
// sets `transport_failed` when the transport itself failed.
Status ReceivePieces(PeerTransport& transport, int source, int tag, const std::string& what,
                     const orbax::Location& tmp, const std::vector<FileEntry>& files, const std::vector<uint64_t>& have,
                     const std::vector<bool>& committed, std::vector<std::vector<std::string>>& parts,
                     PositionalWriteStore* in_place, uint64_t total, const TransferOptions& options,
                     uint64_t& received, uint64_t& pieces_taken, bool& transport_failed) {
  HalfwayPoint halfway{&options.at_point, kPointTransferHalfReceived, total};
  for (size_t i = 0; i < files.size(); ++i) {
    const FileEntry& f = files[i];
    if (committed[i]) continue;
    const bool single = f.size <= options.piece_bytes;
    const std::string key = tmp.Key(f.path);
    std::unique_ptr<KvWriter> writer;
    std::unique_ptr<PositionalFile> file;
    if (single) {
      CAIRN_ASSIGN_OR_RETURN(writer, tmp.store->OpenWriter(key));
    } else if (in_place) {
      auto opened = in_place->OpenPositional(key, have[i]);
      if (!opened.ok()) return opened.status().Annotate(what);
      file = std::move(*opened);
    }
    for (uint64_t offset = have[i]; offset < f.size;) {
      const uint64_t want = std::min<uint64_t>(options.piece_bytes, f.size - offset);
      options.budget->Acquire(want + kFrameBytes);
      engine::BudgetHold hold(options.budget, want + kFrameBytes);
      const std::string where = what + ": file `" + f.path + "` at offset " + std::to_string(offset);
      // The piece as the transport holds it (ZeroMQ: the frame and the
      // bytes as two parts, not joined): checked and written from there.
      uint64_t n = 0;
      auto consume = [&](ByteView first, ByteView second) -> Status {
        Buffer joined;
        if (first.size() < kFrameBytes || (first.size() > kFrameBytes && !second.empty())) {
          joined.resize(first.size() + second.size());
          std::copy(first.begin(), first.end(), joined.data());
          std::copy(second.begin(), second.end(), joined.data() + first.size());
          first = joined.view();
          second = ByteView();
        }
        if (first.size() < kFrameBytes) return DataLossError(where + ": a piece shorter than its frame");
        const uint32_t index = LoadLE32(first.data());
        const uint32_t crc = LoadLE32(first.data() + 4);
        const uint64_t at = LoadLE64(first.data() + 8);
        const ByteView data = second.empty() ? first.subspan(kFrameBytes) : second;
        n = data.size();
        if (index != i || at != offset || n != want) {
          return DataLossError(where + ": the piece is out of sequence (file " + std::to_string(index) +
                               ", offset " + std::to_string(at) + ", " + std::to_string(n) + " bytes)");
        }
        if (Crc32c(data) != crc) return DataLossError(where + ": crc32c mismatch");
        if (single) {
          CAIRN_RETURN_IF_ERROR(writer->Append(data).Annotate(where));
        } else if (file) {
          // The piece in its place, then its (empty) marker: a marker whose
          // bytes did not survive fails its check on resuming.
          CAIRN_RETURN_IF_ERROR(file->WriteAt(offset, data).Annotate(where));
          CAIRN_RETURN_IF_ERROR(tmp.store->Put(PartKey(tmp, i, offset, crc), ByteView()).Annotate(where));
        } else {
          parts[i].push_back(PartKey(tmp, i, offset, crc));
          CAIRN_RETURN_IF_ERROR(tmp.store->Put(parts[i].back(), data).Annotate(where));
        }
        return Status::OK();
      };
      Status consumed;
      Status got = transport.ReceiveParts(source, tag, options.piece_bytes + kFrameBytes, options.timeout,
                                          [&](ByteView first, ByteView second) {
                                            consumed = consume(first, second);
                                            return consumed;
                                          });
      if (!got.ok() && consumed.ok()) transport_failed = true;
      else ++pieces_taken;
      CAIRN_RETURN_IF_ERROR(got);
      offset += n;
      received += n;
      halfway.Update(received);
    }
    if (single) {
      CAIRN_RETURN_IF_ERROR(writer->Commit().Annotate(what));
    } else if (file) {
      CAIRN_RETURN_IF_ERROR(file->Sync().Annotate(what));
      CAIRN_RETURN_IF_ERROR(tmp.store->Put(CompleteKey(tmp, i), ByteView()).Annotate(what));
    } else CAIRN_RETURN_IF_ERROR(Assemble(tmp, i, key, parts[i], options).Annotate(what + ": file `" + f.path + "`"));
  }
  return Status::OK();
}

// Step 1 as the receiver reads it.
struct Header {
  uint64_t source_crc = 0;
  Json list;
  std::vector<FileEntry> files;
};

// Checks a header; a sender that has nothing to send sets `sender_failed`.
Result<Header> ParseHeader(const Buffer& bytes, const std::string& name, const std::string& what,
                           bool& sender_failed) {
  auto header = ParseJson(AsText(bytes), "transfer header");
  if (!header.ok()) return header.status().Annotate(what);
  auto transfer = GetStringField(*header, "transfer");
  if (!transfer.ok() || *transfer != name) {
    return DataLossError(what + ": the peer sent another transfer (" +
                         (transfer.ok() ? *transfer : std::string(transfer.status().message())) + ")");
  }
  const Json* ok = FindField(*header, "ok");
  if (ok == nullptr || !ok->is_boolean()) return DataLossError(what + ": malformed header");
  if (!ok->get<bool>()) {
    sender_failed = true;
    auto error = GetStringField(*header, "error");
    return UnavailableError(what + ": the sender has nothing to send: " + (error.ok() ? *error : "?"));
  }
  Header h;
  CAIRN_ASSIGN_OR_RETURN(const Json* source_id, GetField(*header, "source"));
  CAIRN_ASSIGN_OR_RETURN(h.source_crc, JsonToUInt(*source_id, "source"));
  CAIRN_ASSIGN_OR_RETURN(const Json* list, GetField(*header, "files"));
  if (!list->is_array() || list->size() > kMaxFiles) return DataLossError(what + ": malformed file list");
  for (const Json& f : *list) {
    if (!f.is_object()) return DataLossError(what + ": malformed file entry");
    CAIRN_ASSIGN_OR_RETURN(std::string path, GetStringField(f, "path"));
    CAIRN_ASSIGN_OR_RETURN(const Json* size, GetField(f, "size"));
    CAIRN_ASSIGN_OR_RETURN(uint64_t n, JsonToUInt(*size, "size"));
    if (!SafeRelativePath(path)) return DataLossError(what + ": unsafe path `" + path + "` in the file list");
    h.files.push_back({std::move(path), n});
  }
  h.list = *list;
  return h;
}

// Step 2: what the receiver keeps of an earlier attempt.
struct Destination {
  orbax::PendingCommit pending;
  PositionalWriteStore* in_place = nullptr;
  std::vector<uint64_t> have;
  std::vector<bool> committed;
  std::vector<std::vector<std::string>> parts;
};

Result<Destination> PrepareDestination(const Header& h, const std::string& name, const orbax::Location& dst,
                                       const std::string& what, const TransferOptions& options) {
  const std::vector<FileEntry>& files = h.files;
  const std::string record = DumpJson({{"transfer", name}, {"source", h.source_crc}, {"files", h.list}});
  Destination d;
  d.pending = orbax::PendingCommitFor(dst, kReceiptSaveId);
  d.in_place = options.write_in_place ? AsPositionalWriteStore(d.pending.location.store.get()) : nullptr;
  d.have.assign(files.size(), 0);
  d.committed.assign(files.size(), false);
  d.parts.resize(files.size());
  auto stored = d.pending.location.store->Get(d.pending.location.Key(kRecordFile));
  const bool resume = stored.ok() && stored->has_value() && AsText(**stored) == record;
  if (!resume) {
    if (orbax::Exists(dst)) CAIRN_RETURN_IF_ERROR(dst.store->DeletePrefix(dst.prefix).Annotate(what));
    CAIRN_ASSIGN_OR_RETURN(d.pending, orbax::BeginCommit(dst, kReceiptSaveId));
    CAIRN_RETURN_IF_ERROR(
        d.pending.location.store->Put(d.pending.location.Key(kRecordFile), AsBytes(record)).Annotate(what));
    return d;
  }
  const orbax::Location& tmp = d.pending.location;
  CAIRN_ASSIGN_OR_RETURN(std::vector<KeyInfo> held, tmp.store->List(tmp.prefix));
  std::map<std::string, uint64_t> sizes;
  for (const KeyInfo& k : held) sizes.emplace(k.key, k.size);
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string key = tmp.Key(files[i].path);
    const bool pieces = files[i].size > options.piece_bytes;
    auto it = sizes.find(key);
    // A file written in place is at its full size before it is durable:
    // only its completion marker says it is done.
    const bool done = it != sizes.end() && it->second == files[i].size &&
                      (!pieces || !d.in_place || sizes.count(CompleteKey(tmp, i)));
    if (done) {
      d.have[i] = files[i].size;
      d.committed[i] = true;
    } else if (pieces) {
      auto kept = KeptParts(tmp, i, files[i], options.piece_bytes, d.in_place ? &key : nullptr, d.parts[i]);
      if (!kept.ok()) return kept.status().Annotate(what);
      d.have[i] = *kept;
    }
  }
  return d;
}

}  // namespace

Result<uint64_t> ReceiveDirectory(PeerTransport& transport, int source, int tag, const std::string& name,
                                  const orbax::Location& dst, const TransferOptions& options) {
  const std::string what = "receiving " + name + " from process " + std::to_string(source) + " into " + dst.Path();
  if (tag < 0 || tag >= PeerTransport::kMaxTransferTag) {
    return InvalidArgumentError(what + ": tag " + std::to_string(tag) + " is outside the transfer tags");
  }
  Expectation pieces_expected_here = transport.Expect(source, tag);
  // Step 1.
  CAIRN_ASSIGN_OR_RETURN(Buffer header_bytes, transport.Receive(source, tag, kMaxHeaderBytes, options.timeout));
  const size_t max_piece = options.piece_bytes + kFrameBytes;
  bool sender_failed = false;
  auto header = ParseHeader(header_bytes, name, what, sender_failed);
  if (!header.ok()) {
    // What was taken may not be the sender's header, which may still come
    // (then its end frame follows); a sender may also not be there at all:
    // wait for it a little only.
    if (sender_failed) return header.status();
    const PeerTransport::Duration wait = std::min<PeerTransport::Duration>(options.timeout, std::chrono::seconds(10));
    return Abort(transport, source, tag, header.status(), 3, wait, std::max(max_piece, kMaxHeaderBytes));
  }
  const std::vector<FileEntry>& files = header->files;
  // Step 2: resume the pending copy of this very source, or start afresh.
  auto prepared = PrepareDestination(*header, name, dst, what, options);
  if (!prepared.ok()) return Abort(transport, source, tag, prepared.status(), 1, options.timeout, max_piece);
  Destination& d = *prepared;
  const orbax::Location& tmp = d.pending.location;
  Json have_json = Json::array();
  uint64_t total = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    have_json.push_back(d.have[i]);
    total += files[i].size - d.have[i];
  }
  const std::string answer = DumpJson({{"have", have_json}});
  CAIRN_RETURN_IF_ERROR(
      transport.Send(source, tag + PeerTransport::kMaxTransferTag, AsBytes(answer), options.timeout).Annotate(what));
  // Step 4. Pieces the sender will send (those of the files not held).
  uint64_t pieces_expected = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    if (!d.committed[i]) {
      pieces_expected += (files[i].size - d.have[i] + options.piece_bytes - 1) / options.piece_bytes;
    }
  }
  uint64_t pieces_taken = 0;  // pieces the transport handed over, used or not
  bool transport_failed = false;
  uint64_t received = 0;
  Status pieces = ReceivePieces(transport, source, tag, what, tmp, files, d.have, d.committed, d.parts, d.in_place,
                                total, options, received, pieces_taken, transport_failed);
  // A receiver that stops early (a piece failed its check, a write failed)
  // tells its sender, which stops at once, and discards the rest: at most
  // the pieces not taken yet and the end frame.
  if (!pieces.ok() && transport_failed) return pieces;
  if (!pieces.ok()) {
    return Abort(transport, source, tag, pieces, pieces_expected - std::min(pieces_taken, pieces_expected) + 1,
                 options.timeout, max_piece);
  }
  // Step 5.
  Status published = tmp.store->DeletePrefix(tmp.Key(kPartsDir) + "/");
  if (published.ok()) published = tmp.store->Delete(tmp.Key(kRecordFile));
  if (published.ok()) published = orbax::FinishCommit(d.pending);
  if (!published.ok()) return Abort(transport, source, tag, published.Annotate(what), 1, options.timeout, max_piece);
  const std::string done = DumpJson({{"done", true}});
  transport.Send(source, tag + PeerTransport::kMaxTransferTag, AsBytes(done), options.timeout).IgnoreError();
  return received;
}

}  // namespace cairn::emergency
