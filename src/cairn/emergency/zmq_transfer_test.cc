// A step copied between two processes over the ZeroMQ transport (real
// libzmq sockets on localhost), from a RAM disk and from a disk directory.
// On a RAM disk the sender maps each page-aligned piece and the transport
// seals it out of place into the message (SendFramedFrom); elsewhere it
// reads the piece and seals it in place (SendFramed). Either way the copy
// is bit-exact and the sender's files are left as they were.
// (Built unless cairn is configured with -DCAIRN_WITH_ZMQ=OFF.)
#if CAIRN_HAVE_ZMQ
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "cairn/emergency/dir_transfer.h"
#include "cairn/emergency/zmq_transport.h"
#include "cairn/engine/testing/thread_coordinator.h"
#include "cairn/kvstore/mapped_read.h"
#include "cairn/util/testing/file_bytes.h"

namespace cairn::emergency {
namespace {
using ::cairn::testing::ReadFileBytes;
namespace fs = std::filesystem;
using std::chrono::seconds;

// 1 MiB and 5,000 bytes: 16 whole pieces of 64 KiB and a short last one.
std::string Values() {
  std::string v((size_t{1} << 20) + 5000, '\0');
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<char>(i * 131 + (i >> 12));
  return v;
}

class ZmqTransfer : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    // The disk case in the working directory (the build tree), not in
    // /tmp, which may be a RAM disk.
    const fs::path base = GetParam() ? fs::path("/dev/shm") : fs::current_path();
    root_ = base / ("cairn_zmq_transfer_" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_ / "src" / "4" / "state");
    std::ofstream(root_ / "src" / "4" / "commit_success.txt") << "done";
    std::ofstream(root_ / "src" / "4" / "state" / "w", std::ios::binary) << values_;
  }
  void TearDown() override { fs::remove_all(root_); }

  const std::string values_ = Values();
  fs::path root_;
};

TEST_P(ZmqTransfer, AStepArrivesBitExactAndTheSourceIsLeftAsItWas) {
  auto src = orbax::OpenLocation((root_ / "src" / "4").string());
  auto dst = orbax::OpenLocation((root_ / "dst" / "4").string());
  ASSERT_TRUE(src.ok() && dst.ok());
  // The piece path this case means to take: mapped on the RAM disk only.
  MappedReadStore* maps = AsMappedReadStore(src->store.get());
  ASSERT_NE(maps, nullptr);
  auto mapped = maps->MapRange(src->Key("state/w"), 64 << 10, 64 << 10);
  ASSERT_TRUE(mapped.ok()) << mapped.status().ToString();
  struct statfs fs_info {};
  ASSERT_EQ(statfs(root_.c_str(), &fs_info), 0);
  const bool ram_disk = fs_info.f_type == TMPFS_MAGIC || fs_info.f_type == RAMFS_MAGIC;
  ASSERT_EQ(ram_disk, GetParam()) << root_ << ": the disk case needs a working directory off RAM disks";
  ASSERT_EQ(*mapped != nullptr, ram_disk);

  engine::testing::ThreadGroup group(2);
  std::vector<std::shared_ptr<PeerTransport>> t(2);
  {
    std::vector<std::thread> opening;
    for (int p = 0; p < 2; ++p) {
      opening.emplace_back([&, p] {
        auto opened = NewZmqTransport(group.Member(p), "127.0.0.1", seconds(30));
        ASSERT_TRUE(opened.ok()) << opened.status().ToString();
        t[p] = *opened;
      });
    }
    for (std::thread& th : opening) th.join();
  }
  ASSERT_TRUE(t[0] && t[1]);
  engine::ByteBudget budget(8 << 20);
  TransferOptions options{64 << 10, &budget, seconds(30), {}};
  const std::string name = "local step 4 of process 1";
  Result<uint64_t> sent = uint64_t{0};
  std::thread sender([&] { sent = SendDirectory(*t[1], 0, 3, name, *src, Status::OK(), options); });
  Result<uint64_t> got = ReceiveDirectory(*t[0], 1, 3, name, *dst, options);
  sender.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_TRUE(sent.ok()) << sent.status().ToString();
  EXPECT_EQ(*got, values_.size() + 4);
  EXPECT_TRUE(ReadFileBytes(root_ / "dst" / "4" / "state" / "w") == values_);
  EXPECT_TRUE(fs::exists(root_ / "dst" / "4" / "commit_success.txt"));  // the receiver's own commit
  // Sealed out of place: neither the file nor a mapping of it changed.
  EXPECT_TRUE(ReadFileBytes(root_ / "src" / "4" / "state" / "w") == values_);
  if (*mapped != nullptr) {
    EXPECT_TRUE(std::equal(values_.begin() + (64 << 10), values_.begin() + (128 << 10),
                           reinterpret_cast<const char*>((*mapped)->data())));
  }
}

INSTANTIATE_TEST_SUITE_P(RamDiskAndDisk, ZmqTransfer, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) { return i.param ? "RamDisk" : "Disk"; });

}  // namespace
}  // namespace cairn::emergency
#endif  // CAIRN_HAVE_ZMQ
