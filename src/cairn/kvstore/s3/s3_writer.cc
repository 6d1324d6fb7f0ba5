// The streamed writer of S3KvStore::OpenWriter (S3Writer, s3_writer.h).
//
// Protocol (what is visible when):
//   1. Append copies bytes into the part being filled: the first part holds
//      up to `multipart_threshold` bytes, the later ones `part_size`.
//      Nothing is sent while the value fits in the first part.
//   2. When a full part must take more bytes, the upload starts (POST
//      <key>?uploads, once) and the part is PUT as part n on a thread of its
//      own; the writer takes another buffer and goes on filling. At most
//      kPartsHeld - 1 parts are in flight: an Append that fills another part
//      waits for one of them. Stored parts are invisible: no object exists
//      under the key and a reader sees its old value.
//   3. Commit of a value that never filled the first part: Put (one PUT
//      below `multipart_threshold`), visible when it returns OK. Otherwise the last part is
//      sent, every part awaited, then POST <key>?uploadId=<id> with the
//      parts' ETags makes the whole value visible at once.
//   4. Any failure (a part, the completion, too many parts) and destruction
//      without a successful Commit: the parts in flight are awaited, then
//      DELETE <key>?uploadId=<id> aborts the upload, so neither an object nor
//      stored parts remain and the key keeps its old value. (A process killed
//      in between leaves stored parts until a bucket lifecycle rule removes
//      them; no object.)
#include "cairn/kvstore/s3/s3_writer.h"

#include <algorithm>
#include <string>
#include <utility>

#include "cairn/kvstore/http/part_buffer.h"

namespace cairn::s3 {

using http::HttpCall;
using http::HttpResponse;

Result<std::unique_ptr<KvWriter>> S3KvStore::OpenWriter(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate(url_));
  return std::unique_ptr<KvWriter>(std::make_unique<S3Writer>(this, std::string(key)));
}

S3Writer::S3Writer(S3KvStore* store, std::string key)
    : store_(store),
      key_(std::move(key)),
      part_size_(store->options().part_size),
      first_part_size_(std::min(std::max(store->options().multipart_threshold, part_size_),
                                kMaxFirstPart)),
      upload_(*store, key_, "streamed multipart upload") {}

S3Writer::~S3Writer() {
  Reap(/*all=*/true, /*need_room=*/false).IgnoreError();
  upload_.Abort();  // step 4 (nothing when completed or never started)
}

Buffer S3Writer::TakeBuffer() {
  if (!spare_.empty()) {
    Buffer b = std::move(spare_.back());
    spare_.pop_back();
    return b;
  }
  Buffer b;
  b.reserve(part_size_);
  return b;
}

void S3Writer::Account() {
  uint64_t held = filling_.size();
  for (const auto& f : in_flight_) held += f->data.size();
  high_water_ = std::max(high_water_, held);
}

Status S3Writer::Fail(Status s) {
  if (error_.ok()) error_ = s;
  Reap(/*all=*/true, /*need_room=*/false).IgnoreError();
  upload_.Abort();  // step 4
  return error_;
}

Status S3Writer::Reap(bool all, bool need_room) {
  Status first;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
      if (!(*it)->done) {
        ++it;
        continue;
      }
      (*it)->thread.join();  // it has set `done` and let go of mu_
      if (first.ok() && !(*it)->status.ok()) first = (*it)->status;
      if ((*it)->data.capacity() <= part_size_) {  // not the large first part
        (*it)->data.clear();
        spare_.push_back(std::move((*it)->data));
      }
      it = in_flight_.erase(it);
    }
    const bool wait = (all && !in_flight_.empty()) ||
                      (need_room && in_flight_.size() >= static_cast<size_t>(kPartsHeld - 1));
    if (!wait || (!first.ok() && !all)) break;
    done_cv_.wait(lock);
  }
  return first;
}

Status S3Writer::SendFilling() {
  // Step 2.
  if (parts_sent_ >= S3MultipartUpload::kMaxParts) {
    return Fail(ResourceExhaustedError(
        upload_.operation() + ": the value needs more than " +
        std::to_string(S3MultipartUpload::kMaxParts) + " parts of " + std::to_string(part_size_) +
        " bytes (S3's limit); raise CAIRN_S3_PART_SIZE"));
  }
  if (!upload_.started()) {
    Status s = upload_.Start();
    if (!s.ok()) return Fail(std::move(s));
  }
  Status room = Reap(/*all=*/false, /*need_room=*/true);
  if (!room.ok()) return Fail(std::move(room));
  auto f = std::make_unique<InFlight>();
  f->part = ++parts_sent_;
  f->data = std::move(filling_);
  InFlight* p = f.get();
  HttpCall call = upload_.PartCall(p->part, p->data.view());
  {
    std::lock_guard<std::mutex> lock(mu_);
    in_flight_.push_back(std::move(f));
  }
  p->thread = std::thread([this, p, call = std::move(call)]() mutable {
    HttpCall described = call;
    Result<HttpResponse> r = store_->options().http->Execute(std::move(call));
    Status s = upload_.RecordPart(p->part, described, std::move(r));
    {
      std::lock_guard<std::mutex> lock(mu_);
      p->status = std::move(s);
      p->done = true;
    }
    done_cv_.notify_all();
  });
  return Status::OK();
}

Status S3Writer::Append(ByteView bytes) {
  if (committed_) return FailedPreconditionError("append after commit of " + store_->Describe(key_));
  if (!error_.ok()) return error_;
  while (!bytes.empty()) {
    const uint64_t limit = parts_sent_ == 0 ? first_part_size_ : part_size_;
    if (filling_.size() == limit) {
      CAIRN_RETURN_IF_ERROR(SendFilling());
      filling_ = TakeBuffer();
      continue;
    }
    const size_t take = std::min<uint64_t>(limit - filling_.size(), bytes.size());
    const size_t need = filling_.size() + take;
    if (need > filling_.capacity()) {
      // The first part grows (later ones are recycled at their full size).
      filling_.reserve(http::PartBufferCapacity(need, filling_.capacity(), limit));
    }
    filling_.append(bytes.subspan(0, take));
    bytes = bytes.subspan(take);
    size_ += take;
    Account();
  }
  return Status::OK();
}

Status S3Writer::Commit() {
  if (committed_) return FailedPreconditionError("second commit of " + store_->Describe(key_));
  committed_ = true;
  if (!error_.ok()) return error_;
  if (!upload_.started()) {
    // Step 3, a value within the first part.
    Status s = store_->Put(key_, filling_.view());
    filling_ = Buffer();
    return s;
  }
  // Step 3: the last part (never empty: a part is sent only when more bytes
  // follow it), every part, then the completion.
  CAIRN_RETURN_IF_ERROR(SendFilling());
  Status parts = Reap(/*all=*/true, /*need_room=*/false);
  if (!parts.ok()) return Fail(std::move(parts));
  Status done = upload_.Complete(parts_sent_);
  if (!done.ok()) return Fail(std::move(done));
  spare_.clear();
  return Status::OK();
}

}  // namespace cairn::s3
