// Directory transfers (dir_transfer.h): a copy is byte-identical, a
// corrupted or interrupted transfer leaves nothing that looks like a step,
// an interrupted one resumes with the checked pieces it kept (unless the
// source was saved again), and a sender's failure reaches the receiver at
// once.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "cairn/emergency/dir_transfer.h"
#include "cairn/emergency/local_step.h"
#include "cairn/emergency/retention.h"
#include "cairn/layout/orbax/save_owner.h"
#include "cairn/layout/orbax/step.h"
#include "cairn/util/testing/file_bytes.h"

namespace cairn::emergency {
namespace {
using ::cairn::testing::ReadFileBytes;
namespace fs = std::filesystem;

// Forwards to another transport, flipping one byte of message `corrupt_at`
// or dropping every message from `drop_from` on.
class FaultyTransport final : public PeerTransport {
 public:
  FaultyTransport(std::shared_ptr<PeerTransport> base, int corrupt_at, int drop_from)
      : base_(std::move(base)), corrupt_at_(corrupt_at), drop_from_(drop_from) {}
  int process_index() const override { return base_->process_index(); }
  int process_count() const override { return base_->process_count(); }
  Status Send(int dest, int tag, ByteView bytes, Duration timeout) override {
    const int n = sent_++;
    if (drop_from_ >= 0 && n >= drop_from_) return Status::OK();
    if (n != corrupt_at_) return base_->Send(dest, tag, bytes, timeout);
    Buffer copy = Buffer::CopyOf(bytes);
    copy.data()[copy.size() - 1] ^= 1;
    return base_->Send(dest, tag, copy.view(), timeout);
  }
  Expectation Expect(int source, int tag) override { return base_->Expect(source, tag); }
  Result<Buffer> Receive(int source, int tag, size_t max_bytes, Duration timeout) override {
    return base_->Receive(source, tag, max_bytes, timeout);
  }

 private:
  std::shared_ptr<PeerTransport> base_;
  int corrupt_at_, drop_from_;
  int sent_ = 0;
};

// Every test runs twice: a file longer than a piece received in place (the
// file driver's capability) and, as on stores without it, as parts joined
// at the end.
class DirTransfer : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("cairn_dir_transfer_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "src" / "7" / "state" / "d");
    std::ofstream(root_ / "src" / "7" / "commit_success.txt") << "done";
    std::ofstream(root_ / "src" / "7" / "state" / "d" / "data") << std::string(1000, 'x') + "tail";
    std::ofstream(root_ / "src" / "7" / "state" / "empty");
  }
  void TearDown() override { fs::remove_all(root_); }

  orbax::Location Loc(const fs::path& p) { return *orbax::OpenLocation(p.string()); }

  // Sends src/7 over `sender_transport` and receives it into dst/7.
  Result<uint64_t> Copy(std::shared_ptr<PeerTransport> sender_transport, std::shared_ptr<PeerTransport> receiver,
                        const Status& source_status = Status::OK()) {
    engine::ByteBudget budget(1 << 20);
    TransferOptions t{100, &budget, std::chrono::seconds(2), {}};
    t.write_in_place = GetParam();
    Status sent;
    std::thread sender([&] {
      sent = SendDirectory(*sender_transport, 1, 5, "step 7", Loc(root_ / "src" / "7"), source_status, t).status();
    });
    auto got = ReceiveDirectory(*receiver, 0, 5, "step 7", Loc(root_ / "dst" / "7"), t);
    sender.join();
    EXPECT_EQ(budget.in_use(), 0u);
    return got;
  }

  fs::path root_;
};

TEST_P(DirTransfer, CopiesEveryFileExactly) {
  InProcessNetwork net(2);
  auto got = Copy(net.Endpoint(0), net.Endpoint(1));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, 4u + 1004u);
  EXPECT_EQ(ReadFileBytes(root_ / "dst" / "7" / "state" / "d" / "data"), std::string(1000, 'x') + "tail");
  EXPECT_TRUE(fs::exists(root_ / "dst" / "7" / "state" / "empty"));
  EXPECT_TRUE(fs::exists(root_ / "dst" / "7" / "commit_success.txt"));
}

// Found by the crash campaign (emergency path, a failed removal of a
// received copy's owner record): a published step that still holds a
// save's owner record (step.h 4d) was sent with it, and the record stood
// in for the receiver's own in its pending directory: every later fetch of
// that step failed ("another save took over this save's directory"), and
// the job could not restore a step all its hosts had finished.
TEST_P(DirTransfer, AStrayOwnerRecordIsNotSent) {
  const std::string record =
      R"({"boot_id":"b","host":"h","lease_expires_unix_ns":1,"pid":9,"pid_ns":"p","save_id":"0123456789abcdef","start_ticks":1})";
  std::ofstream(root_ / "src" / "7" / std::string(orbax::kOwnerRecordFile)) << record;
  std::ofstream(root_ / "src" / "7" / "state" / std::string(orbax::kOwnerRecordFile)) << record;
  InProcessNetwork net(2);
  auto got = Copy(net.Endpoint(0), net.Endpoint(1));
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, 4u + 1004u);
  EXPECT_FALSE(fs::exists(root_ / "dst" / "7" / std::string(orbax::kOwnerRecordFile)));
  EXPECT_FALSE(fs::exists(root_ / "dst" / "7" / "state" / std::string(orbax::kOwnerRecordFile)));
  EXPECT_EQ(ReadFileBytes(root_ / "dst" / "7" / "state" / "d" / "data"), std::string(1000, 'x') + "tail");
}

TEST_P(DirTransfer, CorruptPieceFailsAndLeavesNoStep) {
  InProcessNetwork net(2);
  auto got = Copy(std::make_shared<FaultyTransport>(net.Endpoint(0), 3, -1), net.Endpoint(1));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("crc32c mismatch"), std::string::npos) << got.status().ToString();
  EXPECT_FALSE(fs::exists(root_ / "dst" / "7"));
  auto steps = orbax::ListSteps(Loc(root_ / "dst"), orbax::StepNameFormat{});
  ASSERT_TRUE(steps.ok());
  EXPECT_TRUE(steps->empty());  // the pending directory is not a step
}

// The receiver tells its sender it stopped (the sender fails at once,
// naming it, instead of sending the rest or waiting for its timeout), takes
// what was sent off the transport, and the next transfer under the same tag
// between the same processes is not handed the failed one's pieces.
TEST_P(DirTransfer, ACorruptPieceLeavesNothingQueuedForTheNextTransfer) {
  InProcessNetwork net(2);
  engine::ByteBudget budget(1 << 20);
  TransferOptions t{100, &budget, std::chrono::seconds(2), {}};
  t.write_in_place = GetParam();
  FaultyTransport corrupting(net.Endpoint(0), 3, -1);
  Result<uint64_t> sent = uint64_t{0};
  std::thread sender([&] {
    sent = SendDirectory(corrupting, 1, 5, "step 7", Loc(root_ / "src" / "7"), Status::OK(), t);
  });
  auto first = ReceiveDirectory(*net.Endpoint(1), 0, 5, "step 7", Loc(root_ / "dst" / "7"), t);
  sender.join();
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), StatusCode::kDataLoss) << first.status().ToString();
  ASSERT_FALSE(sent.ok());
  EXPECT_NE(sent.status().message().find("process 1 stopped the transfer"), std::string::npos)
      << sent.status().ToString();
  EXPECT_NE(sent.status().message().find("crc32c mismatch"), std::string::npos) << sent.status().ToString();
  auto second = Copy(net.Endpoint(0), net.Endpoint(1));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(ReadFileBytes(root_ / "dst" / "7" / "state" / "d" / "data"), std::string(1000, 'x') + "tail");
  EXPECT_EQ(budget.in_use(), 0u);
}

TEST_P(DirTransfer, InterruptedTransferTimesOutAndTheRetryReplacesIt) {
  InProcessNetwork net(2);
  auto got = Copy(std::make_shared<FaultyTransport>(net.Endpoint(0), -1, 4), net.Endpoint(1));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable) << got.status().ToString();
  EXPECT_FALSE(fs::exists(root_ / "dst" / "7"));
  InProcessNetwork fresh(2);
  auto retry = Copy(fresh.Endpoint(0), fresh.Endpoint(1));
  ASSERT_TRUE(retry.ok()) << retry.status().ToString();
  EXPECT_EQ(ReadFileBytes(root_ / "dst" / "7" / "state" / "d" / "data"), std::string(1000, 'x') + "tail");
  for (const auto& e : fs::directory_iterator(root_ / "dst")) EXPECT_EQ(e.path().filename(), "7");
}

// Sends: 0 the header, 1 commit_success.txt, then state/d/data (1004 bytes)
// in pieces of 100. Dropping from send 6 on leaves 4 pieces received.
TEST_P(DirTransfer, InterruptedTransferResumesWhereItStopped) {
  InProcessNetwork net(2);
  auto cut = Copy(std::make_shared<FaultyTransport>(net.Endpoint(0), -1, 6), net.Endpoint(1));
  ASSERT_EQ(cut.status().code(), StatusCode::kUnavailable) << cut.status().ToString();
  const fs::path pending = root_ / "dst" / "7.orbax-checkpoint-tmp-resumable";
  EXPECT_TRUE(fs::exists(pending / "commit_success.txt"));
  EXPECT_TRUE(fs::exists(pending / "cairn_transfer_parts" / "1"));
  auto listed = orbax::ListSteps(Loc(root_ / "dst"), orbax::StepNameFormat{});
  ASSERT_TRUE(listed.ok());
  EXPECT_TRUE(listed->empty());  // a partial copy is never a step
  InProcessNetwork fresh(2);
  auto resumed = Copy(fresh.Endpoint(0), fresh.Endpoint(1));
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(*resumed, 1004u - 400u);  // only what was missing moved again
  EXPECT_EQ(ReadFileBytes(root_ / "dst" / "7" / "state" / "d" / "data"), std::string(1000, 'x') + "tail");
  EXPECT_FALSE(fs::exists(root_ / "dst" / "7" / "cairn_transfer.json"));
  EXPECT_FALSE(fs::exists(root_ / "dst" / "7" / "cairn_transfer_parts"));
  for (const auto& e : fs::directory_iterator(root_ / "dst")) EXPECT_EQ(e.path().filename(), "7");
}

// Found by the crash campaign (emergency path): a job killed during a
// receipt left `<step>.orbax-checkpoint-tmp-resumable` that no later save
// ever removed. Retention removes those of steps up to the one it runs for.
TEST_P(DirTransfer, UnfinishedReceiptsUpToAStepAreRemovedAndNothingElse) {
  InProcessNetwork net(2);
  auto cut = Copy(std::make_shared<FaultyTransport>(net.Endpoint(0), -1, 6), net.Endpoint(1));
  ASSERT_EQ(cut.status().code(), StatusCode::kUnavailable) << cut.status().ToString();
  const fs::path dst = root_ / "dst";
  ASSERT_TRUE(fs::exists(dst / "7.orbax-checkpoint-tmp-resumable"));
  fs::create_directories(dst / "9.orbax-checkpoint-tmp-resumable");      // a later step's: kept
  fs::create_directories(dst / "5.orbax-checkpoint-tmp-0123456789abcdef");  // not a receipt's: kept
  fs::create_directories(dst / "6");                                        // a step: kept
  ASSERT_TRUE(RemoveUnfinishedReceipts(Loc(dst), 6).ok());
  EXPECT_TRUE(fs::exists(dst / "7.orbax-checkpoint-tmp-resumable"));
  Status removed = RemoveUnfinishedReceipts(Loc(dst), 8);
  ASSERT_TRUE(removed.ok()) << removed.ToString();
  EXPECT_FALSE(fs::exists(dst / "7.orbax-checkpoint-tmp-resumable"));
  for (const char* kept : {"9.orbax-checkpoint-tmp-resumable", "5.orbax-checkpoint-tmp-0123456789abcdef", "6"}) {
    EXPECT_TRUE(fs::exists(dst / kept)) << kept;
  }
  EXPECT_TRUE(RemoveUnfinishedReceipts(Loc(root_ / "missing"), 8).ok());
}

TEST_P(DirTransfer, AKeptPieceThatNoLongerMatchesItsCrcIsSentAgain) {
  InProcessNetwork net(2);
  ASSERT_FALSE(Copy(std::make_shared<FaultyTransport>(net.Endpoint(0), -1, 6), net.Endpoint(1)).ok());
  // Damage the third kept piece (offset 200): it and those after it go.
  const fs::path pending = root_ / "dst" / "7.orbax-checkpoint-tmp-resumable";
  const fs::path parts = pending / "cairn_transfer_parts" / "1";
  bool damaged = false;
  if (GetParam()) {  // in place: the piece's bytes are in the file itself
    std::fstream f(pending / "state" / "d" / "data", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(210);
    f.put('y');
    damaged = f.good();
  }
  for (const auto& e : fs::directory_iterator(parts)) {
    if (GetParam()) break;
    if (e.path().filename().string().rfind("200.", 0) != 0) continue;
    std::fstream f(e.path(), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(10);
    f.put('y');
    damaged = true;
  }
  ASSERT_TRUE(damaged);
  InProcessNetwork fresh(2);
  auto resumed = Copy(fresh.Endpoint(0), fresh.Endpoint(1));
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(*resumed, 1004u - 200u);
  EXPECT_EQ(ReadFileBytes(root_ / "dst" / "7" / "state" / "d" / "data"), std::string(1000, 'x') + "tail");
}

// In place, the pieces land in the file itself and the parts are empty
// markers; a file at its full size is not taken as done without the
// `complete` marker (here: grown with garbage after the cut), and is cut
// back to its checked pieces and finished.
class DirTransferInPlace : public DirTransfer {};
INSTANTIATE_TEST_SUITE_P(InPlace, DirTransferInPlace, ::testing::Values(true));

TEST_P(DirTransferInPlace, AFileAtFullSizeWithoutItsMarkerIsFinishedFromItsCheckedPieces) {
  InProcessNetwork net(2);
  ASSERT_FALSE(Copy(std::make_shared<FaultyTransport>(net.Endpoint(0), -1, 6), net.Endpoint(1)).ok());
  const fs::path pending = root_ / "dst" / "7.orbax-checkpoint-tmp-resumable";
  const fs::path data = pending / "state" / "d" / "data";
  EXPECT_EQ(ReadFileBytes(data), std::string(400, 'x'));  // 4 pieces, in place
  int markers = 0;
  for (const auto& e : fs::directory_iterator(pending / "cairn_transfer_parts" / "1")) {
    EXPECT_EQ(fs::file_size(e.path()), 0u) << e.path();  // no data staged twice
    ++markers;
  }
  EXPECT_EQ(markers, 4);
  std::ofstream(data, std::ios::app | std::ios::binary) << std::string(604, 'g');
  ASSERT_EQ(fs::file_size(data), 1004u);
  InProcessNetwork fresh(2);
  auto resumed = Copy(fresh.Endpoint(0), fresh.Endpoint(1));
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(*resumed, 1004u - 400u);
  EXPECT_EQ(ReadFileBytes(root_ / "dst" / "7" / "state" / "d" / "data"), std::string(1000, 'x') + "tail");
  EXPECT_FALSE(fs::exists(root_ / "dst" / "7" / "cairn_transfer_parts"));
}

TEST_P(DirTransfer, ARewrittenSourceStartsTheCopyAfresh) {
  std::ofstream(root_ / "src" / "7" / "_CHECKPOINT_METADATA") << "{\"init_timestamp_nsecs\": 1}";
  InProcessNetwork net(2);
  ASSERT_FALSE(Copy(std::make_shared<FaultyTransport>(net.Endpoint(0), -1, 6), net.Endpoint(1)).ok());
  // The step is saved again (same sizes, new content and metadata): nothing
  // of the old partial copy may be kept.
  std::ofstream(root_ / "src" / "7" / "_CHECKPOINT_METADATA") << "{\"init_timestamp_nsecs\": 2}";
  std::ofstream(root_ / "src" / "7" / "state" / "d" / "data") << std::string(1000, 'z') + "tail";
  InProcessNetwork fresh(2);
  auto again = Copy(fresh.Endpoint(0), fresh.Endpoint(1));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(*again, 4u + 1004u + 27u);
  EXPECT_EQ(ReadFileBytes(root_ / "dst" / "7" / "state" / "d" / "data"), std::string(1000, 'z') + "tail");
}

TEST_P(DirTransfer, SenderFailureReachesTheReceiver) {
  InProcessNetwork net(2);
  auto got = Copy(net.Endpoint(0), net.Endpoint(1), DataLossError("disk full"));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(got.status().message().find("nothing to send: disk full"), std::string::npos) << got.status().ToString();
}

INSTANTIATE_TEST_SUITE_P(InPlaceAndParts, DirTransfer, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "InPlace" : "Parts"; });

TEST(LocalSteps, OnlyCommittedStepsWithARecordAreHeld) {
  const fs::path root = fs::temp_directory_path() / ("cairn_local_steps_" + std::to_string(::getpid()));
  fs::remove_all(root);
  LocalStepRecord r;
  r.step = 3;
  r.process_index = 1;
  r.process_count = 2;
  r.arrays["w"] = {"float32", {4}, {Box({0}, {4})}};
  const std::string text = DumpJson(LocalStepRecordToJson(r));
  auto make = [&](const fs::path& dir, bool committed, const std::string& record) {
    fs::create_directories(dir);
    if (committed) std::ofstream(dir / "commit_success.txt") << "ok";
    if (!record.empty()) std::ofstream(dir / "cairn_local_step.json") << record;
  };
  make(root / "3", true, text);                                               // held
  make(root / "4", false, text);                                              // not committed
  make(root / "5.orbax-checkpoint-tmp-0123456789abcdef", true, text);         // pending
  make(root / "6", true, "{not json");                                        // unreadable record
  make(root / "peer_copies" / "process_1" / "3", true, text);                 // a copy of owner 1
  make(root / "peer_copies" / "process_0" / "3", true, text);                 // under the wrong owner
  auto held = ListHoldings(*orbax::OpenLocation(root.string()));
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  ASSERT_EQ(held->size(), 2u);
  EXPECT_EQ((*held)[0].kind, Holding::Kind::kOwn);
  EXPECT_EQ((*held)[0].record.step, 3);
  EXPECT_EQ((*held)[1].kind, Holding::Kind::kPeerCopy);
  EXPECT_EQ((*held)[1].record.process_index, 1);
  auto none = ListHoldings(*orbax::OpenLocation((root / "missing").string()));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  fs::remove_all(root);
}

}  // namespace
}  // namespace cairn::emergency
