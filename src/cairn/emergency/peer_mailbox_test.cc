// PeerMailbox's rules (peer_mailbox.h): what nobody expects keeps one
// message and drops the rest; an expected queue fills to its bound, then
// holds the reader back until a receiver takes; an exchange's end drops
// what is left of it.
#include "cairn/emergency/peer_mailbox.h"

#include <gtest/gtest.h>

#include <thread>

namespace cairn::emergency {
namespace {

PeerMailbox::Message Bytes(size_t n) {
  auto owner = std::make_shared<std::vector<uint8_t>>(n, 7);
  return {ByteView(owner->data(), owner->size()), ByteView(), owner};
}

constexpr PeerMailbox::Limits kLimits{/*per_queue_bytes=*/1000, /*unexpected_bytes=*/600, /*total_bytes=*/5000};

TEST(PeerMailbox, KeepsOneMessageNobodyExpectsAndDropsTheRest) {
  PeerMailbox box(kLimits);
  EXPECT_TRUE(box.Deliver(1, 5, Bytes(100)));
  EXPECT_FALSE(box.Deliver(1, 5, Bytes(100)));  // one already waits there
  EXPECT_TRUE(box.Deliver(1, 6, Bytes(300)));
  EXPECT_FALSE(box.Deliver(2, 5, Bytes(300)));  // over unexpected_bytes in all
  EXPECT_EQ(box.counters().dropped_unexpected, 2u);
  EXPECT_TRUE(box.HasRoom());  // what nobody expects never holds the reader back
  auto first = box.Take(1, 5, std::chrono::seconds(1), "test");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->size(), 100u);
  EXPECT_FALSE(box.Take(1, 5, std::chrono::milliseconds(10), "test").ok());
}

TEST(PeerMailbox, AnExpectedQueueFillsToItsBoundThenHoldsTheReaderBack) {
  PeerMailbox box(kLimits);
  box.Expect(1, 5);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(box.Deliver(1, 5, Bytes(300)));
  EXPECT_FALSE(box.HasRoom());  // 3 x (300 + overhead) >= 1000
  std::thread taker([&] { EXPECT_TRUE(box.Take(1, 5, std::chrono::seconds(5), "test").ok()); });
  EXPECT_TRUE(box.WaitForRoom(std::chrono::seconds(5)));
  taker.join();
  EXPECT_EQ(box.counters().dropped_unexpected, 0u);
  box.EndExpect(1, 5);
  const PeerMailbox::Counters c = box.counters();
  EXPECT_EQ(c.dropped_after_exchange, 2u);  // the rest of the exchange
  EXPECT_EQ(c.queued_bytes, 0u);
  EXPECT_TRUE(box.HasRoom());
}

TEST(PeerMailbox, AWaitingReceiverGetsWhatArrivesThenStopEndsWaits) {
  PeerMailbox box(kLimits);
  ASSERT_TRUE(box.Deliver(1, 5, Bytes(10)));
  Result<PeerMailbox::Message> got = Bytes(0);
  std::thread taker([&] {
    ASSERT_TRUE(box.Take(1, 5, std::chrono::seconds(5), "test").ok());
    got = box.Take(1, 5, std::chrono::seconds(5), "test");  // the second, delivered while waiting
  });
  while (box.counters().queued_bytes != 0) std::this_thread::yield();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_TRUE(box.Deliver(1, 5, Bytes(20)));
  taker.join();
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), 20u);
  box.Stop();
  auto stopped = box.Take(1, 5, std::chrono::seconds(5), "receiving");
  EXPECT_FALSE(stopped.ok());
  EXPECT_NE(stopped.status().message().find("closing"), std::string::npos);
}

}  // namespace
}  // namespace cairn::emergency
