// Implements the transfer protocol of dir_transfer.h (numbered steps there).
#include "cairn/emergency/dir_transfer.h"

#include <vector>

#include "cairn/layout/orbax/step.h"
#include "cairn/util/coding.h"
#include "cairn/util/crc32c.h"
#include "cairn/util/json.h"

namespace cairn::emergency {
namespace {

constexpr size_t kFrameBytes = 20;
constexpr size_t kMaxHeaderBytes = size_t{64} << 20;
constexpr size_t kMaxFiles = size_t{1} << 20;

struct FileEntry {
  std::string path;  // relative to the directory
  uint64_t size = 0;
};

// Relative paths from a peer must stay inside the destination.
bool SafeRelativePath(const std::string& p) {
  if (p.empty() || p.front() == '/' || p.back() == '/') return false;
  size_t start = 0;
  while (start <= p.size()) {
    size_t end = p.find('/', start);
    if (end == std::string::npos) end = p.size();
    const std::string_view part(p.data() + start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

}  // namespace

Result<uint64_t> SendDirectory(PeerTransport& transport, int dest, int tag, const std::string& name,
                               const orbax::Location& src, const Status& source_status,
                               const TransferOptions& options) {
  const std::string what = "sending " + name + " (" + src.Path() + ") to process " + std::to_string(dest);
  // Step 1.
  std::vector<FileEntry> files;
  Status status = source_status;
  if (status.ok()) {
    auto listed = src.store->List(src.prefix);
    if (!listed.ok()) status = listed.status();
    else
      for (const KeyInfo& k : *listed) files.push_back({k.key.substr(src.prefix.size()), k.size});
  }
  Json header = {{"transfer", name}, {"ok", status.ok()}, {"error", std::string(status.message())}};
  Json list = Json::array();
  for (const FileEntry& f : files) list.push_back({{"path", f.path}, {"size", f.size}});
  header["files"] = std::move(list);
  const std::string text = DumpJson(header);
  CAIRN_RETURN_IF_ERROR(transport.Send(dest, tag, AsBytes(text), options.timeout).Annotate(what));
  if (!status.ok()) return status.Annotate(what);
  // Step 2.
  uint64_t sent = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const FileEntry& f = files[i];
    for (uint64_t offset = 0; offset < f.size;) {
      const uint64_t n = std::min<uint64_t>(options.piece_bytes, f.size - offset);
      options.budget->Acquire(2 * n + kFrameBytes);  // the read and the framed piece
      engine::BudgetHold hold(options.budget, 2 * n + kFrameBytes);
      CAIRN_ASSIGN_OR_RETURN(std::optional<Buffer> data,
                             src.store->Get(src.Key(f.path), ByteRange::Range(offset, n)));
      if (!data || data->size() != n) {
        return DataLossError(what + ": " + src.store->Describe(src.Key(f.path)) + " changed while sending");
      }
      CAIRN_ASSIGN_OR_RETURN(Buffer piece, Buffer::TryAllocate(kFrameBytes + n, "a transfer piece"));
      StoreLE32(piece.data(), static_cast<uint32_t>(i));
      StoreLE32(piece.data() + 4, Crc32c(data->view()));
      StoreLE64(piece.data() + 8, offset);
      std::copy(data->data(), data->data() + n, piece.data() + kFrameBytes);
      data.reset();
      CAIRN_RETURN_IF_ERROR(transport.Send(dest, tag, piece.view(), options.timeout).Annotate(what));
      offset += n;
      sent += n;
    }
  }
  return sent;
}

Result<uint64_t> ReceiveDirectory(PeerTransport& transport, int source, int tag, const std::string& name,
                                  const orbax::Location& dst, const TransferOptions& options) {
  const std::string what = "receiving " + name + " from process " + std::to_string(source) + " into " + dst.Path();
  // Step 1.
  CAIRN_ASSIGN_OR_RETURN(Buffer header_bytes, transport.Receive(source, tag, kMaxHeaderBytes, options.timeout));
  auto header = ParseJson(std::string_view(reinterpret_cast<const char*>(header_bytes.data()), header_bytes.size()),
                          "transfer header");
  if (!header.ok()) return header.status().Annotate(what);
  auto transfer = GetStringField(*header, "transfer");
  if (!transfer.ok() || *transfer != name) {
    return DataLossError(what + ": the peer sent another transfer (" +
                         (transfer.ok() ? *transfer : std::string(transfer.status().message())) + ")");
  }
  const Json* ok = FindField(*header, "ok");
  if (ok == nullptr || !ok->is_boolean()) return DataLossError(what + ": malformed header");
  if (!ok->get<bool>()) {
    auto error = GetStringField(*header, "error");
    return UnavailableError(what + ": the sender has nothing to send: " + (error.ok() ? *error : "?"));
  }
  CAIRN_ASSIGN_OR_RETURN(const Json* list, GetField(*header, "files"));
  if (!list->is_array() || list->size() > kMaxFiles) return DataLossError(what + ": malformed file list");
  std::vector<FileEntry> files;
  for (const Json& f : *list) {
    if (!f.is_object()) return DataLossError(what + ": malformed file entry");
    CAIRN_ASSIGN_OR_RETURN(std::string path, GetStringField(f, "path"));
    CAIRN_ASSIGN_OR_RETURN(const Json* size, GetField(f, "size"));
    CAIRN_ASSIGN_OR_RETURN(uint64_t n, JsonToUInt(*size, "size"));
    if (!SafeRelativePath(path)) return DataLossError(what + ": unsafe path `" + path + "` in the file list");
    files.push_back({std::move(path), n});
  }
  // Step 3: into a pending sibling of `dst` (an older copy is replaced).
  if (orbax::Exists(dst)) CAIRN_RETURN_IF_ERROR(dst.store->DeletePrefix(dst.prefix).Annotate(what));
  CAIRN_ASSIGN_OR_RETURN(orbax::PendingCommit pending, orbax::BeginCommit(dst, orbax::NewSaveId()));
  const orbax::Location& tmp = pending.location;
  uint64_t received = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const FileEntry& f = files[i];
    const std::string key = tmp.Key(f.path);
    CAIRN_ASSIGN_OR_RETURN(std::unique_ptr<KvWriter> writer, tmp.store->OpenWriter(key));
    for (uint64_t offset = 0; offset < f.size;) {
      const uint64_t want = std::min<uint64_t>(options.piece_bytes, f.size - offset);
      options.budget->Acquire(want + kFrameBytes);
      engine::BudgetHold hold(options.budget, want + kFrameBytes);
      CAIRN_ASSIGN_OR_RETURN(
          Buffer piece, transport.Receive(source, tag, options.piece_bytes + kFrameBytes, options.timeout));
      const std::string where = what + ": file `" + f.path + "` at offset " + std::to_string(offset);
      if (piece.size() < kFrameBytes) return DataLossError(where + ": a piece shorter than its frame");
      const uint32_t index = LoadLE32(piece.data());
      const uint32_t crc = LoadLE32(piece.data() + 4);
      const uint64_t at = LoadLE64(piece.data() + 8);
      const ByteView data(piece.data() + kFrameBytes, piece.size() - kFrameBytes);
      const uint64_t n = data.size();
      if (index != i || at != offset || n != want) {
        return DataLossError(where + ": the piece is out of sequence (file " + std::to_string(index) +
                             ", offset " + std::to_string(at) + ", " + std::to_string(n) + " bytes)");
      }
      if (Crc32c(data) != crc) return DataLossError(where + ": crc32c mismatch");
      CAIRN_RETURN_IF_ERROR(writer->Append(data).Annotate(where));
      offset += n;
      received += n;
    }
    CAIRN_RETURN_IF_ERROR(writer->Commit().Annotate(what));
  }
  // Step 4.
  CAIRN_RETURN_IF_ERROR(orbax::FinishCommit(pending).Annotate(what));
  return received;
}

}  // namespace cairn::emergency
