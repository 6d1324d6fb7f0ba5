// The streamed writer of GcsKvStore::OpenWriter (GcsWriter, gcs_writer.h).
//
// Protocol (what is visible when):
//   1. Append copies bytes into the chunk being filled: the first chunk
//      takes `resumable_threshold` bytes (rounded down to a multiple of the
//      chunk size), the later ones `upload_chunk_size` (a multiple of 256
//      KiB). Nothing is sent while the value fits in the first chunk.
//   2. When a full chunk must take more bytes, a resumable session is
//      opened (once, without a length) and the chunk is PUT to it as
//      `bytes <a>-<b>/*` on a sender thread, while Append fills the other
//      buffer. Before the next chunk goes, the previous one must have been
//      kept whole (308 with Range `bytes=0-<b>`); chunks go one at a time,
//      in order. A chunk that fails with a transport error or 429/5xx is
//      resumed from the offset the session reports (gcs_resumable.h), never
//      resent blindly. Nothing is visible under the key: a reader sees its
//      old value.
//   3. Commit of a value that never filled the first chunk: Put (one media
//      upload below `resumable_threshold`), visible when it returns OK. Otherwise the last chunk goes as
//      `bytes <a>-<b>/<total>` (`bytes */<total>` if empty) after the
//      previous one; the server's 200/201 makes the whole object visible at
//      once.
//   4. Any failure and destruction without a successful Commit: the chunk
//      in flight is awaited, then DELETE on the session URI cancels the
//      upload, so no object appears and the key keeps its old value. (A
//      process killed in between leaves an unfinished session, which GCS
//      drops after a week; no object.)
#include "cairn/kvstore/gcs/gcs_writer.h"

#include <algorithm>
#include <string>
#include <utility>

#include "cairn/kvstore/http/part_buffer.h"

namespace cairn::gcs {

Result<std::unique_ptr<KvWriter>> GcsKvStore::OpenWriter(std::string_view key) {
  CAIRN_RETURN_IF_ERROR(ValidateKey(key).Annotate(url_));
  return std::unique_ptr<KvWriter>(std::make_unique<GcsWriter>(this, std::string(key)));
}

GcsWriter::GcsWriter(GcsKvStore* store, std::string key)
    : store_(store),
      key_(std::move(key)),
      chunk_size_(store->options().upload_chunk_size),
      // A multiple of chunk_size_ (itself one of 256 KiB), as every chunk
      // but the last must be.
      first_chunk_size_(std::max<uint64_t>(1, store->options().resumable_threshold / chunk_size_) *
                        chunk_size_),
      session_(*store, key_, "streamed resumable upload") {}

GcsWriter::~GcsWriter() {
  Wait().IgnoreError();
  session_.Cancel();  // step 4 (nothing when finished or never started)
}

void GcsWriter::Account() {
  high_water_ = std::max<uint64_t>(high_water_, filling_.size() + sending_.size());
}

Status GcsWriter::Wait() {
  if (!sender_.joinable()) return Status::OK();
  sender_.join();
  return sent_status_;
}

Status GcsWriter::Fail(Status s) {
  if (error_.ok()) error_ = s;
  Wait().IgnoreError();
  session_.Cancel();  // step 4
  return error_;
}

Status GcsWriter::SendFilling() {
  // Step 2.
  if (!session_.started()) {
    Status s = session_.Start(std::nullopt);
    if (!s.ok()) return Fail(std::move(s));
  }
  Status previous = Wait();
  if (!previous.ok()) return Fail(std::move(previous));
  std::swap(sending_, filling_);
  filling_.clear();
  if (filling_.capacity() > chunk_size_) filling_ = Buffer();  // the large first chunk
  if (filling_.capacity() < chunk_size_) filling_.reserve(chunk_size_);
  Account();
  const uint64_t offset = sent_;
  sent_ += sending_.size();
  sender_ = std::thread([this, offset] {
    sent_status_ = session_.SendChunk(offset, sending_.view(), std::nullopt);
  });
  return Status::OK();
}

Status GcsWriter::Append(ByteView bytes) {
  if (committed_) return FailedPreconditionError("append after commit of " + store_->Describe(key_));
  if (!error_.ok()) return error_;
  while (!bytes.empty()) {
    const uint64_t limit = session_.started() ? chunk_size_ : first_chunk_size_;
    if (filling_.size() == limit) {
      CAIRN_RETURN_IF_ERROR(SendFilling());
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

Status GcsWriter::Commit() {
  if (committed_) return FailedPreconditionError("second commit of " + store_->Describe(key_));
  committed_ = true;
  if (!error_.ok()) return error_;
  if (!session_.started()) {
    // Step 3, a value within the first chunk.
    Status s = store_->Put(key_, filling_.view());
    filling_ = Buffer();
    return s;
  }
  // Step 3: the last chunk, after the previous one.
  Status previous = Wait();
  if (!previous.ok()) return Fail(std::move(previous));
  Status last = session_.SendChunk(sent_, filling_.view(), size_);
  if (!last.ok()) return Fail(std::move(last));
  filling_ = Buffer();
  sending_ = Buffer();
  return Status::OK();
}

}  // namespace cairn::gcs
