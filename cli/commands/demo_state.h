// The demo's embedded default: a synthetic transformer training state.
//
// A decoder-only transformer sized to a byte budget: an embedding
// [vocab, d], `layers` blocks of attention (q, k, v, o: [d, d]), MLP
// (w_in [d, 4d], w_out [4d, d]) and two layer-norm scales [d], and a final
// norm. Every parameter is held four times, as a mixed-precision Adam
// trainer holds it: the bfloat16 parameter the model computes with, the
// float32 master weight, and Adam's two float32 moments (mu, nu). Values
// look like trained ones (random mantissas, so they barely compress); the
// bfloat16 parameter is the master weight rounded, as a trainer makes it.
//
// Sharding, as 8 devices hold it: every matrix is split by rows into 8
// blocks (device i holds block i); vectors are replicated on all 8. The
// restore asks for another sharding: matrices split by columns into 8
// blocks, vectors split into 8 pieces.
//
// Thread safety: a DemoState is immutable after MakeDemoState.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace cairn::cli {

inline constexpr int kDemoDevices = 8;

// One array of the state and its values (C order, native endian).
struct DemoArray {
  std::vector<std::string> path;  // {"params", "layer_03", "attn_q"}
  std::string dtype;              // "bfloat16" or "float32"
  std::vector<int64_t> shape;     // rank 1 or 2
  std::unique_ptr<uint8_t[]> data;
  uint64_t bytes = 0;
};

struct DemoState {
  int layers = 0;
  int64_t d_model = 0;
  int64_t vocab = 0;
  uint64_t bytes = 0;  // all arrays
  std::vector<DemoArray> arrays;
};

// Builds a state of about `target_bytes` (at least one layer; d_model a
// power of two from 256, divisible by 8). Values are filled on all cores.
DemoState MakeDemoState(uint64_t target_bytes);

// A box of an array: origin and shape, in elements.
struct DemoBox {
  std::vector<int64_t> origin;
  std::vector<int64_t> shape;
};

// The box device `device` holds when saving (rows split 8 ways; a vector is
// whole on every device) and when restoring (columns split 8 ways; a vector
// split into 8 pieces).
DemoBox SaveBox(const DemoArray& a, int device);
DemoBox RestoreBox(const DemoArray& a, int device);

// Copies `box` of `a` into `out` (C order over box.shape) / compares it;
// both run on one thread.
void CopyBox(const DemoArray& a, const DemoBox& box, uint8_t* out);
bool BoxEquals(const DemoArray& a, const DemoBox& box, const uint8_t* got);

// Bytes of `box` of `a`.
uint64_t BoxBytes(const DemoArray& a, const DemoBox& box);

}  // namespace cairn::cli
