// An interrupted conversion (include/cairn/interrupt.h) stops at its next
// slab, commits nothing, says how far it got and what a re-run keeps; a
// re-run resumes. Interrupted while verifying, the destination stays
// committed and the message says so.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cairn/engine/convert/convert.h"
#include "cairn/engine/convert/convert_checkpoint.h"
#include "cairn/engine/testing/random_data.h"
#include "cairn/kvstore/url.h"
#include "cairn/layout/axlearn/axlearn_checkpoint.h"

namespace cairn::engine {
namespace {

using layout::ArrayInfo;

constexpr int kArrays = 8;

// An AXLearn step of kArrays float32 arrays of 64 x 48 (one chunk each).
std::map<std::string, std::vector<uint8_t>> WriteSource(const std::shared_ptr<KvStore>& store) {
  std::vector<ArrayInfo> arrays;
  std::map<std::string, std::vector<uint8_t>> data;
  for (int i = 0; i < kArrays; ++i) {
    const std::string path = "model/w" + std::to_string(i);
    arrays.push_back(ArrayInfo{path, DType::kFloat32, {64, 48}, {64, 48}, 0, {}});
    data[path] = testing::RandomFloatBytes(64 * 48, 100 + i);
  }
  axlearn::WriterOptions options;
  options.step = 3;
  auto writer = axlearn::CreateWriter(store, "src/step_00000003", arrays, options);
  EXPECT_TRUE(writer.ok()) << writer.status().ToString();
  for (const ArrayInfo& a : arrays) {
    EXPECT_TRUE((*writer)->WriteBox(a.path, Box::FromShape(a.shape), data[a.path].data()).ok());
  }
  EXPECT_TRUE((*writer)->Commit().ok());
  return data;
}

ConvertCheckpointRequest Request(const std::string& root, const std::string& to,
                                 Interrupt* interrupt, int interrupt_after_slabs) {
  ConvertCheckpointRequest r;
  r.source = "memory://" + root + "/src/";
  r.dest = "memory://" + root + "/dst/";
  r.to = to;
  r.options.threads = 1;
  r.options.interrupt = interrupt;
  if (interrupt != nullptr) {
    auto slabs = std::make_shared<int>(0);
    r.options.progress = [interrupt, slabs, interrupt_after_slabs](const ConvertProgress&) {
      if (++*slabs == interrupt_after_slabs) interrupt->Request();
    };
  }
  return r;
}

TEST(ConvertInterrupt, StopsBeforeTheCommitAndARerunResumes) {
  auto store = *OpenKvStore("memory://interrupt_resume/");
  const auto data = WriteSource(store);
  Interrupt interrupt;
  auto stopped = ConvertCheckpoint(Request("interrupt_resume", "axlearn", &interrupt, 3));
  ASSERT_FALSE(stopped.ok());
  EXPECT_EQ(stopped.status().code(), StatusCode::kCancelled);
  const std::string message(stopped.status().message());
  for (const std::string part :
       {"the conversion was interrupted after 3 of 8 arrays", "nothing was committed at "
        "memory://interrupt_resume/dst/", "Run the same conversion again to resume"}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << " not in: " << message;
  }
  EXPECT_FALSE(store->Get("dst/step_00000003/index")->has_value());
  // The re-run keeps the 3 arrays and copies the other 5.
  auto again = ConvertCheckpoint(Request("interrupt_resume", "axlearn", nullptr, 0));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->stats.arrays_resumed, 3u);
  auto out = axlearn::OpenReader(store, "dst/step_00000003");
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  for (const auto& [path, bytes] : data) {
    std::vector<uint8_t> got(bytes.size());
    ASSERT_TRUE((*out)->ReadBox(path, Box::FromShape({64, 48}), got.data()).ok());
    EXPECT_TRUE(got == bytes) << path;
  }
}

// An Orbax destination (OCDBT: chunks are durable only once a batch is
// committed) keeps the arrays completed before the interrupt, and the same
// process resumes it at once (its lease is not in the way).
TEST(ConvertInterrupt, AnOrbaxDestinationIsResumedByTheSameProcess) {
  const std::string dir = std::filesystem::temp_directory_path() /
                          ("cairn_interrupt_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto store = *OpenKvStore("memory://interrupt_orbax/");
  const auto data = WriteSource(store);
  Interrupt interrupt;
  ConvertCheckpointRequest r = Request("interrupt_orbax", "orbax", &interrupt, 3);
  r.dest = dir;
  auto stopped = ConvertCheckpoint(r);
  ASSERT_EQ(stopped.status().code(), StatusCode::kCancelled) << stopped.status().ToString();
  EXPECT_NE(stopped.status().message().find("after 3 of 8 arrays"), std::string_view::npos)
      << stopped.status().ToString();
  ConvertCheckpointRequest again = Request("interrupt_orbax", "orbax", nullptr, 0);
  again.dest = dir;
  again.options.verify = true;
  auto resumed = ConvertCheckpoint(again);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  EXPECT_EQ(resumed->stats.arrays_resumed, 3u);
  std::filesystem::remove_all(dir);
}

TEST(ConvertInterrupt, ADestinationWrittenFrontToBackSaysARerunStartsOver) {
  auto store = *OpenKvStore("memory://interrupt_st/");
  WriteSource(store);
  Interrupt interrupt;
  auto stopped = ConvertCheckpoint(Request("interrupt_st", "safetensors", &interrupt, 2));
  ASSERT_EQ(stopped.status().code(), StatusCode::kCancelled) << stopped.status().ToString();
  const std::string message(stopped.status().message());
  EXPECT_NE(message.find("after 2 of 8 arrays"), std::string::npos) << message;
  EXPECT_NE(message.find("to start over (safetensors is written front to back"),
            std::string::npos)
      << message;
  auto keys = store->List("dst/");
  ASSERT_TRUE(keys.ok());
  for (const KeyInfo& k : *keys) EXPECT_EQ(k.key.find(".safetensors"), std::string::npos) << k.key;
}

TEST(ConvertInterrupt, InterruptedWhileVerifyingTheDestinationStaysCommitted) {
  auto store = *OpenKvStore("memory://interrupt_verify/");
  WriteSource(store);
  Interrupt interrupt;
  ConvertCheckpointRequest r = Request("interrupt_verify", "axlearn", &interrupt, kArrays);
  r.options.verify = true;
  auto stopped = ConvertCheckpoint(r);
  ASSERT_EQ(stopped.status().code(), StatusCode::kCancelled) << stopped.status().ToString();
  EXPECT_EQ(stopped.status().message(), kInterruptedAfterCommit);
  EXPECT_TRUE(store->Get("dst/step_00000003/index")->has_value());
}

TEST(ConvertInterrupt, NotRequestedChangesNothing) {
  auto store = *OpenKvStore("memory://interrupt_none/");
  WriteSource(store);
  Interrupt interrupt;  // never requested
  ConvertCheckpointRequest r = Request("interrupt_none", "axlearn", &interrupt, -1);
  r.options.verify = true;
  auto done = ConvertCheckpoint(r);
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->stats.arrays, static_cast<size_t>(kArrays));
}

}  // namespace
}  // namespace cairn::engine
