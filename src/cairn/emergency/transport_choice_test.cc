// The transport choice (transport_choice.h).
#include <gtest/gtest.h>


#include "cairn/emergency/transport_choice.h"

namespace cairn::emergency {
namespace {

TransportEnvironment Env(int processes, int mpi_world, bool zmq) {
  TransportEnvironment e;
  e.process_count = processes;
  e.mpi_world_size = mpi_world;
  e.zmq_available = zmq;
  return e;
}

TransportKind Picked(const TransportEnvironment& env) {
  Result<TransportChoice> c = ChooseTransport("", std::nullopt, 2, env);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? c->kind : TransportKind::kNone;
}

TEST(TransportChoice, MpiUnderMpirunWithTheSameProcessesElseZmqElseNone) {
  EXPECT_EQ(Picked(Env(4, 4, true)), TransportKind::kMpi);
  EXPECT_EQ(Picked(Env(4, 8, true)), TransportKind::kZmq);  // mpirun started another job's processes
  EXPECT_EQ(Picked(Env(4, 1, true)), TransportKind::kZmq);
  EXPECT_EQ(Picked(Env(4, 1, false)), TransportKind::kNone);
  EXPECT_EQ(Picked(Env(1, 1, true)), TransportKind::kNone);  // one process: no peers
}

TEST(TransportChoice, ANamedTransportIsUsed) {
  Result<TransportChoice> c = ChooseTransport("zmq", std::nullopt, 2, Env(4, 4, true));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->kind, TransportKind::kZmq);
  c = ChooseTransport("none", std::nullopt, 2, Env(4, 4, true));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->kind, TransportKind::kNone);
  EXPECT_EQ(c->peer_copies, 0);
  c = ChooseTransport("carrier-pigeon", std::nullopt, 2, Env(4, 4, true));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("'carrier-pigeon'"), std::string::npos) << c.status().ToString();
}

TEST(TransportChoice, OnePeerCopyWithATransportAndReplicas) {
  Result<TransportChoice> c = ChooseTransport("", std::nullopt, 2, Env(4, 1, true));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->peer_copies, 1);
  c = ChooseTransport("", std::nullopt, 1, Env(4, 1, true));  // one replica: no peer holds another's
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->peer_copies, 0);
  c = ChooseTransport("mpi", 3, 2, Env(4, 4, true));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->peer_copies, 3);
}

TEST(TransportChoice, RefusesPeerCopiesWithoutATransport) {
  Result<TransportChoice> c = ChooseTransport("none", 1, 2, Env(4, 1, true));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("peer copies need a transport"), std::string::npos) << c.status().ToString();
  c = ChooseTransport("", 1, 2, Env(4, 1, false));
  ASSERT_FALSE(c.ok());
  c = ChooseTransport("zmq", -1, 2, Env(4, 1, true));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("-1"), std::string::npos) << c.status().ToString();
}

}  // namespace
}  // namespace cairn::emergency
