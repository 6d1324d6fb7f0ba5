// Peer assignment (peer_plan.h) and the choice of the step to restore
// (step_choice.h) with hosts missing.
#include <gtest/gtest.h>

#include <set>

#include "cairn/emergency/peer_plan.h"
#include "cairn/emergency/step_choice.h"

namespace cairn::emergency {
namespace {

TEST(PeerPlan, CopiesGoToAnotherReplicaWithTheSameSlot) {
  const ReplicaLayout layout{8, 2};  // replicas {0,1,2,3}, {4,5,6,7}
  for (int p = 0; p < 8; ++p) {
    const int peer = PeerOf(layout, p, 1);
    EXPECT_NE(layout.ReplicaOf(peer), layout.ReplicaOf(p)) << p;
    EXPECT_EQ(layout.SlotOf(peer), layout.SlotOf(p)) << p;
    EXPECT_EQ(SourceOf(layout, peer, 1), p);
  }
  EXPECT_EQ(PeerOf(layout, 1, 1), 5);
  EXPECT_EQ(PeerOf(layout, 6, 1), 2);
}

TEST(PeerPlan, EveryProcessKeepsExactlyOneCopyPerRound) {
  for (const ReplicaLayout layout : {ReplicaLayout{4, 2}, ReplicaLayout{6, 3}, ReplicaLayout{5, 1}}) {
    for (int k = 1; k < layout.process_count; ++k) {
      std::multiset<int> keepers;
      for (int p = 0; p < layout.process_count; ++p) {
        keepers.insert(PeerOf(layout, p, k));
        EXPECT_EQ(SourceOf(layout, PeerOf(layout, p, k), k), p) << "k=" << k << " p=" << p;
      }
      for (int q = 0; q < layout.process_count; ++q) EXPECT_EQ(keepers.count(q), 1u);
    }
  }
}

TEST(PeerPlan, MoreCopiesReachMoreReplicasAndNeverSelf) {
  const ReplicaLayout layout{6, 3};
  const std::vector<int> peers = PeersOf(layout, 1, 2);
  EXPECT_EQ(peers, (std::vector<int>{3, 5}));
  const std::vector<int> sources = SourcesOf(layout, 1, 2);
  EXPECT_EQ(sources, (std::vector<int>{5, 3}));
  for (int q : PeersOf(ReplicaLayout{4, 2}, 0, 3)) EXPECT_NE(q, 0);
}

TEST(PeerPlan, RejectsLayoutsThatDoNotSplit) {
  EXPECT_TRUE(CheckLayout({4, 2}, 1).ok());
  Status s = CheckLayout({5, 2}, 1);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("5 processes cannot form 2"), std::string::npos) << s.ToString();
  s = CheckLayout({4, 2}, 4);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("at most 3"), std::string::npos) << s.ToString();
}

// Records of a 4-process job (2 replicas x 2 slots) saving an [8, 6] array
// split by rows between the slots, and a replicated [6] array.
LocalStepRecord Record(int owner, int64_t step) {
  LocalStepRecord r;
  r.step = step;
  r.process_index = owner;
  r.process_count = 4;
  r.num_replicas = 2;
  const int slot = owner % 2;
  r.arrays["w"] = {"float32", {8, 6}, {Box({4 * slot, 0}, {4, 6})}};
  r.arrays["b"] = {"float32", {6}, {Box({0}, {6})}};
  return r;
}

Holding Held(int owner, int64_t step, int holder) {
  Holding h;
  h.kind = owner == holder ? Holding::Kind::kOwn : Holding::Kind::kPeerCopy;
  h.holder = holder;
  h.record = Record(owner, step);
  return h;
}

// Every process holds its own steps and its peer's (0<->2, 1<->3).
std::vector<Holding> AllHeld(const std::vector<int64_t>& steps, const std::set<int>& lost) {
  const ReplicaLayout layout{4, 2};
  std::vector<Holding> out;
  for (int64_t s : steps) {
    for (int p = 0; p < 4; ++p) {
      if (lost.count(p)) continue;
      out.push_back(Held(p, s, p));
      out.push_back(Held(SourceOf(layout, p, 1), s, p));
    }
  }
  return out;
}

TEST(StepChoice, NewestCompleteLocalStepWhenNothingIsLost) {
  auto c = ChooseStep(AllHeld({6, 7}, {}), {5}, std::nullopt);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->tier, StepChoice::Tier::kLocal);
  EXPECT_EQ(c->step, 7);
  EXPECT_EQ(c->holders.at(1), (std::vector<int>{1, 3}));
}

TEST(StepChoice, OneLostHostLeavesItsStepOnItsPeer) {
  auto c = ChooseStep(AllHeld({6, 7}, {1}), {5}, std::nullopt);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->tier, StepChoice::Tier::kLocal);
  EXPECT_EQ(c->step, 7);
  EXPECT_EQ(c->holders.at(1), (std::vector<int>{3}));  // only the peer copy survives
}

TEST(StepChoice, LosingBothHoldersOfAShardFallsBackToPersistent) {
  // Control: losing one host of each slot keeps everything.
  auto ok = ChooseStep(AllHeld({6, 7}, {0, 3}), {5}, std::nullopt);
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->tier, StepChoice::Tier::kLocal);
  // Processes 1 and 3 are the only holders of rows 4..7.
  auto c = ChooseStep(AllHeld({6, 7}, {1, 3}), {5}, std::nullopt);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->tier, StepChoice::Tier::kPersistent);
  EXPECT_EQ(c->step, 5);
  EXPECT_NE(c->reason.find("24 of its 48 elements"), std::string::npos) << c->reason;
}

TEST(StepChoice, AnIncompleteNewestStepGivesWayToAnOlderCompleteOne) {
  std::vector<Holding> held = AllHeld({6}, {});
  for (int p : {0, 2}) held.push_back(Held(p, 7, p));  // step 7 reached only slot 0
  auto c = ChooseStep(held, {5}, std::nullopt);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->tier, StepChoice::Tier::kLocal);
  EXPECT_EQ(c->step, 6);
  EXPECT_NE(c->reason.find("local step 7 is incomplete"), std::string::npos) << c->reason;
}

TEST(StepChoice, LocalStepsNotNewerThanPersistentAreIgnored) {
  auto c = ChooseStep(AllHeld({4, 5}, {}), {5}, std::nullopt);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->tier, StepChoice::Tier::kPersistent);
  EXPECT_EQ(c->step, 5);
  auto none = ChooseStep({}, {}, std::nullopt);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->tier, StepChoice::Tier::kNone);
}

TEST(StepChoice, RequestedStep) {
  auto local = ChooseStep(AllHeld({6, 7}, {}), {5}, 6);
  ASSERT_TRUE(local.ok());
  EXPECT_EQ(local->tier, StepChoice::Tier::kLocal);
  EXPECT_EQ(local->step, 6);
  auto persistent = ChooseStep(AllHeld({6, 7}, {}), {5}, 5);
  ASSERT_TRUE(persistent.ok());
  EXPECT_EQ(persistent->tier, StepChoice::Tier::kPersistent);
  auto missing = ChooseStep(AllHeld({6, 7}, {1, 3}), {5}, 7);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("step 7 is neither complete"), std::string::npos);
}

TEST(StepChoice, OverlappingOrInconsistentRecordsAreNotComplete) {
  std::map<int, LocalStepRecord> records{{0, Record(0, 7)}, {1, Record(1, 7)}};
  EXPECT_TRUE(CheckComplete(records).ok());
  records[1].arrays["w"].boxes = {Box({2, 0}, {6, 6})};  // overlaps rows 2..3 of owner 0
  Status s = CheckComplete(records);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("overlap"), std::string::npos) << s.ToString();
  records[1] = Record(1, 7);
  records[1].arrays["w"].shape = {8, 7};
  s = CheckComplete(records);
  EXPECT_EQ(s.code(), StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("differs between processes 0 and 1"), std::string::npos) << s.ToString();
}

}  // namespace
}  // namespace cairn::emergency
