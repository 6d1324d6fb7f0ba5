// The sending side of the transfer protocol of dir_transfer.h (numbered
// steps there); the receiving side is in dir_transfer_receive.cc.
#include "cairn/emergency/dir_transfer.h"

#include "cairn/emergency/dir_transfer_frames.h"
#include "cairn/kvstore/mapped_read.h"
#include "cairn/layout/orbax/metadata_files.h"
#include "cairn/util/coding.h"
#include "cairn/util/crc32c.h"
#include "cairn/util/json.h"

namespace cairn::emergency {
using namespace transfer_detail;
namespace {

// Steps 3, 6: the end frame a sender answers an abort with.
void SendEndFrame(PeerTransport& transport, int dest, int tag, const TransferOptions& options) {
  uint8_t end[kFrameBytes] = {};
  StoreLE32(end, kEndFrameIndex);
  transport.Send(dest, tag, ByteView(end, kFrameBytes), options.timeout).IgnoreError();
}

// Steps 3, 6: an answer of the receiver, checked: `key` ("have" or "done")
// is returned; an abort becomes the sender's error, naming the receiver,
// after the end frame (step 3).
Result<Json> ReadAnswer(PeerTransport& transport, int receiver, int tag, const Buffer& bytes, const std::string& key,
                        const std::string& what, const TransferOptions& options) {
  auto answer = ParseJson(AsText(bytes), "transfer answer");
  if (!answer.ok()) return answer.status().Annotate(what + ": process " + std::to_string(receiver));
  if (const Json* abort = FindField(*answer, "abort"); abort != nullptr) {
    SendEndFrame(transport, receiver, tag, options);
    return UnavailableError(what + ": process " + std::to_string(receiver) + " stopped the transfer: " +
                            (abort->is_string() ? abort->get<std::string>() : std::string("?")));
  }
  const Json* value = FindField(*answer, key);
  if (value == nullptr) {
    return DataLossError(what + ": process " + std::to_string(receiver) + " answered without `" + key + "`");
  }
  return *value;
}

}  // namespace

Result<uint64_t> SendDirectory(PeerTransport& transport, int dest, int tag, const std::string& name,
                               const orbax::Location& src, const Status& source_status,
                               const TransferOptions& options) {
  const std::string what = "sending " + name + " (" + src.Path() + ") to process " + std::to_string(dest);
  if (tag < 0 || tag >= PeerTransport::kMaxTransferTag) {
    return InvalidArgumentError(what + ": tag " + std::to_string(tag) + " is outside the transfer tags");
  }
  const int answer_tag = tag + PeerTransport::kMaxTransferTag;
  Expectation answers = transport.Expect(dest, answer_tag);
  // Step 1.
  std::vector<FileEntry> files;
  Status status = source_status;
  uint32_t source = 0;
  if (status.ok()) {
    auto listed = src.store->List(src.prefix);
    if (!listed.ok()) status = listed.status();
    else
      for (const KeyInfo& k : *listed) {
        if (!IsOwnerRecord(k.key)) files.push_back({k.key.substr(src.prefix.size()), k.size});
      }
    auto metadata = src.store->Get(src.Key(orbax::kCheckpointMetadataFile));
    if (status.ok() && !metadata.ok()) status = metadata.status();
    if (metadata.ok() && *metadata) source = Crc32c((*metadata)->view());
  }
  Json header = {{"transfer", name}, {"ok", status.ok()}, {"error", std::string(status.message())},
                 {"source", source}};
  Json list = Json::array();
  for (const FileEntry& f : files) list.push_back({{"path", f.path}, {"size", f.size}});
  header["files"] = std::move(list);
  const std::string text = DumpJson(header);
  CAIRN_RETURN_IF_ERROR(transport.Send(dest, tag, AsBytes(text), options.timeout).Annotate(what));
  if (!status.ok()) return status.Annotate(what);
  // Step 3: what the receiver holds already.
  CAIRN_ASSIGN_OR_RETURN(Buffer answer_bytes, transport.Receive(dest, answer_tag, kMaxHeaderBytes, options.timeout));
  CAIRN_ASSIGN_OR_RETURN(Json have_json, ReadAnswer(transport, dest, tag, answer_bytes, "have", what, options));
  CAIRN_ASSIGN_OR_RETURN(std::vector<int64_t> have, JsonToIntVector(have_json, "have"));
  if (have.size() != files.size()) return DataLossError(what + ": the receiver's answer lists another file count");
  uint64_t total = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const uint64_t h = static_cast<uint64_t>(have[i]);
    if (have[i] < 0 || h > files[i].size || (h != files[i].size && h % options.piece_bytes != 0)) {
      return DataLossError(what + ": the receiver claims " + std::to_string(have[i]) + " bytes of `" +
                           files[i].path + "`");
    }
    total += files[i].size - h;
  }
  HalfwayPoint halfway{&options.at_point, kPointTransferHalfSent, total};
  uint64_t sent = 0;
  for (size_t i = 0; i < files.size(); ++i) {
    const FileEntry& f = files[i];
    for (uint64_t offset = static_cast<uint64_t>(have[i]); offset < f.size;) {
      // An answer now can only be the receiver's abort (step 4): the end
      // frame in place of the rest, and its error.
      if (auto early = transport.Receive(dest, answer_tag, kMaxHeaderBytes, PeerTransport::Duration::zero());
          early.ok()) {
        auto stopped = ReadAnswer(transport, dest, tag, *early, "done", what, options);
        return stopped.ok() ? DataLossError(what + ": process " + std::to_string(dest) + " answered too early")
                            : stopped.status();
      }
      const uint64_t n = std::min<uint64_t>(options.piece_bytes, f.size - offset);
      options.budget->Acquire(2 * n + kFrameBytes);  // the read (or mapping) and the framed piece
      engine::BudgetHold hold(options.budget, 2 * n + kFrameBytes);
      // On a RAM disk the piece is the file's own pages, mapped: the
      // transport's cipher pass copies them into the message (SendFramedFrom).
      // Elsewhere (or off a page boundary) it is read into a buffer the
      // transport sends as it is (SendFramed).
      std::shared_ptr<MappedBytes> mapped;
      if (MappedReadStore* maps = AsMappedReadStore(src.store.get()); maps != nullptr) {
        CAIRN_ASSIGN_OR_RETURN(mapped, maps->MapRange(src.Key(f.path), offset, n));
      }
      std::optional<Buffer> data;
      if (mapped == nullptr) {
        CAIRN_ASSIGN_OR_RETURN(data, src.store->Get(src.Key(f.path), ByteRange::Range(offset, n)));
      }
      const ByteView bytes = mapped ? ByteView(mapped->data(), mapped->size()) : data ? data->view() : ByteView();
      if ((!mapped && !data) || bytes.size() != n) {
        return DataLossError(what + ": " + src.store->Describe(src.Key(f.path)) + " changed while sending");
      }
      // The frame and the bytes: ZeroMQ sends them as two parts, and its
      // receiver does not join them (ReceiveParts).
      uint8_t frame[kFrameBytes] = {};
      StoreLE32(frame, static_cast<uint32_t>(i));
      StoreLE32(frame + 4, Crc32c(bytes));
      StoreLE64(frame + 8, offset);
      const ByteView framing(frame, kFrameBytes);
      CAIRN_RETURN_IF_ERROR((mapped ? transport.SendFramedFrom(dest, tag, framing, bytes, options.timeout)
                                    : transport.SendFramed(dest, tag, framing, std::move(*data), options.timeout))
                                .Annotate(what));
      offset += n;
      sent += n;
      halfway.Update(sent);
    }
  }
  // Step 6.
  CAIRN_ASSIGN_OR_RETURN(Buffer last, transport.Receive(dest, answer_tag, kMaxHeaderBytes, options.timeout));
  CAIRN_RETURN_IF_ERROR(ReadAnswer(transport, dest, tag, last, "done", what, options).status());
  return sent;
}

}  // namespace cairn::emergency
