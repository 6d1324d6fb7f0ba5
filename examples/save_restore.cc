// A C++ program saving and restoring a sharded checkpoint with cairn's
// public API (include/cairn/engine.h), as a trainer would.
//
// Each process holds 4 row blocks ("devices") of a 64 x 32 float32 weight,
// and a replicated bias. The checkpoint is a normal Orbax one (OCDBT + Zarr
// v3): orbax-checkpoint restores it. Then the weight is restored onto
// another sharding (2 column blocks) and compared.
//
//   cairn_example_save_restore DIR                 one process
//   mpiexec -n 2 cairn_example_save_restore DIR    two processes (MPI)
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "cairn/coordinator.h"
#include "cairn/engine.h"
#include "cairn/mpi_coordinator.h"

namespace {

int Fail(const char* what, const cairn::Status& s) {
  std::fprintf(stderr, "%s: %s\n", what, s.ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  std::unique_ptr<cairn::Coordinator> coordinator;
  const char* ranks = std::getenv("OMPI_COMM_WORLD_SIZE");
  if (ranks != nullptr && std::atoi(ranks) > 1) {
    if (auto s = cairn::InitializeMpiIfNeeded(); !s.ok()) return Fail("MPI", s);
    auto mpi = cairn::NewMpiCoordinator();
    if (!mpi.ok()) return Fail("MPI", mpi.status());
    coordinator = std::move(*mpi);
  } else {
    coordinator = cairn::NewSingleProcessCoordinator();
  }
  const int p = coordinator->process_index(), n = coordinator->process_count();
  const int64_t rows = 64, cols = 32, blocks = 4 * n, block_rows = rows / blocks;

  // The global values, known here only to check the restore.
  std::vector<float> weight(rows * cols), bias(cols);
  for (int64_t i = 0; i < rows * cols; ++i) weight[i] = 0.25f * static_cast<float>(i);
  for (int64_t j = 0; j < cols; ++j) bias[j] = -1.0f * static_cast<float>(j);

  cairn::CheckpointArray w{{"params", "w"}, "float32", {rows, cols}, {block_rows, cols}, 1, {}};
  for (int64_t b = 4 * p; b < 4 * (p + 1); ++b) {  // this process's devices
    w.shards.push_back({{b * block_rows, 0}, {block_rows, cols}, &weight[b * block_rows * cols], 0});
  }
  cairn::CheckpointArray bb{{"params", "b"}, "float32", {cols}, {cols}, n, {}};
  bb.shards.push_back({{0}, {cols}, bias.data(), p});  // replica p
  cairn::SaveCheckpointOptions options;
  auto save = cairn::StartSaveCheckpoint(argv[1], {w, bb}, options, *coordinator);
  if (!save.ok()) return Fail("save", save.status());
  if (auto s = (*save)->Wait(); !s.ok()) return Fail("save", s);

  // Restore this process's column block of the weight, and the bias.
  const int64_t col_block = cols / n;
  std::vector<float> got_w(rows * col_block), got_b(cols);
  cairn::RestoreArray rw{{"params", "w"}, "float32",
                         {{{0, p * col_block}, {rows, col_block}, got_w.data()}}};
  cairn::RestoreArray rb{{"params", "b"}, "", {{{0}, {cols}, got_b.data()}}};
  if (auto s = cairn::RestoreCheckpoint(argv[1], {rw, rb}); !s.ok()) return Fail("restore", s);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < col_block; ++j) {
      if (got_w[i * col_block + j] != weight[i * cols + p * col_block + j]) {
        std::fprintf(stderr, "process %d: weight[%lld, %lld] differs\n", p, (long long)i,
                     (long long)(p * col_block + j));
        return 1;
      }
    }
  }
  if (got_b != bias) return Fail("restore", cairn::Status(cairn::StatusCode::kDataLoss, "bias differs"));
  std::printf("process %d of %d: saved and restored %s\n", p, n, argv[1]);
  return 0;
}
