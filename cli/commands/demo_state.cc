#include "commands/demo_state.h"

#include <algorithm>
#include <cstring>
#include <thread>

namespace cairn::cli {
namespace {

// Bytes one parameter takes in the state: bfloat16 + float32 master + mu + nu.
constexpr uint64_t kBytesPerParam = 2 + 4 + 4 + 4;

uint64_t SplitMix(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A float32 bit pattern: random sign (unless `positive`) and mantissa,
// exponent in [lo, lo + 7]: the spread of trained weights or moments.
uint32_t RandomFloatBits(uint64_t r, uint32_t exp_lo, bool positive) {
  const uint32_t mantissa = static_cast<uint32_t>(r) & 0x7fffff;
  const uint32_t exponent = exp_lo + static_cast<uint32_t>((r >> 23) & 7);
  const uint32_t sign = positive ? 0 : static_cast<uint32_t>((r >> 26) & 1) << 31;
  return sign | (exponent << 23) | mantissa;
}

uint16_t RoundToBFloat16(uint32_t bits) {
  bits += 0x7fff + ((bits >> 16) & 1);  // round to nearest even (no NaNs here)
  return static_cast<uint16_t>(bits >> 16);
}

enum class Role { kParam, kMaster, kMu, kNu };

// One parameter's four arrays share its shape; the master weight's values
// decide the bfloat16 parameter's.
struct Fill {
  DemoArray* array;
  Role role;
  uint64_t seed;
};

void FillRange(const Fill& f, uint64_t begin, uint64_t end) {
  uint64_t s = f.seed * 0x100000001b3ULL + begin;
  if (f.role == Role::kParam) {
    auto* out = reinterpret_cast<uint16_t*>(f.array->data.get());
    for (uint64_t i = begin; i < end; ++i) {
      uint64_t t = f.seed * 0x100000001b3ULL + i;  // the master's stream, element i
      out[i] = RoundToBFloat16(RandomFloatBits(SplitMix(t), 117, false));
    }
    return;
  }
  auto* out = reinterpret_cast<uint32_t*>(f.array->data.get());
  const uint32_t exp_lo = f.role == Role::kMaster ? 117 : f.role == Role::kMu ? 108 : 98;
  for (uint64_t i = begin; i < end; ++i) {
    uint64_t t = f.role == Role::kMaster ? f.seed * 0x100000001b3ULL + i : s++;
    out[i] = RandomFloatBits(SplitMix(t), exp_lo, f.role == Role::kNu);
  }
}

uint64_t Elements(const std::vector<int64_t>& shape) {
  uint64_t n = 1;
  for (int64_t d : shape) n *= static_cast<uint64_t>(d);
  return n;
}

}  // namespace

DemoState MakeDemoState(uint64_t target_bytes) {
  DemoState st;
  const uint64_t params = std::max<uint64_t>(target_bytes / kBytesPerParam, 1);
  int64_t d = 256;
  while (uint64_t{12} * static_cast<uint64_t>(2 * d) * static_cast<uint64_t>(2 * d) * 8 <= params) d *= 2;
  st.d_model = d;
  st.vocab = 8 * d;
  const uint64_t ud = static_cast<uint64_t>(d);
  const uint64_t fixed = static_cast<uint64_t>(st.vocab) * ud + ud;
  const uint64_t per_layer = 12 * ud * ud + 2 * ud;
  const uint64_t rest = params > fixed ? params - fixed : 0;
  st.layers = static_cast<int>(std::max<uint64_t>(1, (rest + per_layer / 2) / per_layer));

  // The parameters, in tree order.
  struct Param {
    std::vector<std::string> path;
    std::vector<int64_t> shape;
  };
  std::vector<Param> ps;
  ps.push_back({{"embed"}, {st.vocab, d}});
  for (int l = 0; l < st.layers; ++l) {
    char name[32];
    std::snprintf(name, sizeof name, "layer_%02d", l);
    for (const char* m : {"attn_q", "attn_k", "attn_v", "attn_o"}) ps.push_back({{name, m}, {d, d}});
    ps.push_back({{name, "mlp_in"}, {d, 4 * d}});
    ps.push_back({{name, "mlp_out"}, {4 * d, d}});
    ps.push_back({{name, "norm_attn"}, {d}});
    ps.push_back({{name, "norm_mlp"}, {d}});
  }
  ps.push_back({{"final_norm"}, {d}});

  const char* groups[] = {"params", "master", "opt_mu", "opt_nu"};
  const Role roles[] = {Role::kParam, Role::kMaster, Role::kMu, Role::kNu};
  std::vector<Fill> fills;
  for (int g = 0; g < 4; ++g) {
    for (size_t i = 0; i < ps.size(); ++i) {
      DemoArray a;
      a.path = {groups[g]};
      a.path.insert(a.path.end(), ps[i].path.begin(), ps[i].path.end());
      a.dtype = g == 0 ? "bfloat16" : "float32";
      a.shape = ps[i].shape;
      a.bytes = Elements(a.shape) * (g == 0 ? 2 : 4);
      a.data.reset(new uint8_t[a.bytes]);
      st.bytes += a.bytes;
      st.arrays.push_back(std::move(a));
    }
  }
  for (int g = 0; g < 4; ++g) {
    for (size_t i = 0; i < ps.size(); ++i) {
      // Parameter i's master stream is seeded by i; the moments get their own.
      uint64_t seed = g == 0 || g == 1 ? i + 1 : (uint64_t(g) << 32) + i + 1;
      fills.push_back({&st.arrays[g * ps.size() + i], roles[g], seed});
    }
  }
  // Fill on all cores: each thread takes every n-th slice of every array.
  const unsigned n = std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      for (const Fill& f : fills) {
        const uint64_t count = Elements(f.array->shape);
        const uint64_t slice = (count + n - 1) / n;
        const uint64_t b = std::min<uint64_t>(count, slice * t);
        FillRange(f, b, std::min<uint64_t>(count, b + slice));
      }
    });
  }
  for (auto& t : threads) t.join();
  return st;
}

DemoBox SaveBox(const DemoArray& a, int device) {
  if (a.shape.size() == 1) return {{0}, a.shape};
  const int64_t rows = a.shape[0] / kDemoDevices;
  return {{device * rows, 0}, {rows, a.shape[1]}};
}

DemoBox RestoreBox(const DemoArray& a, int device) {
  if (a.shape.size() == 1) {
    const int64_t n = a.shape[0] / kDemoDevices;
    return {{device * n}, {n}};
  }
  const int64_t cols = a.shape[1] / kDemoDevices;
  return {{0, device * cols}, {a.shape[0], cols}};
}

uint64_t BoxBytes(const DemoArray& a, const DemoBox& box) {
  return Elements(box.shape) * (a.bytes / Elements(a.shape));
}

namespace {

// Calls fn(array offset, box offset, bytes) for each contiguous row of the box.
template <typename Fn>
void ForEachRow(const DemoArray& a, const DemoBox& box, Fn fn) {
  const uint64_t elem = a.bytes / Elements(a.shape);
  if (a.shape.size() == 1) {
    fn(static_cast<uint64_t>(box.origin[0]) * elem, 0, static_cast<uint64_t>(box.shape[0]) * elem);
    return;
  }
  const uint64_t row = static_cast<uint64_t>(box.shape[1]) * elem;
  for (int64_t r = 0; r < box.shape[0]; ++r) {
    const uint64_t src = (static_cast<uint64_t>(box.origin[0] + r) * a.shape[1] + box.origin[1]) * elem;
    fn(src, static_cast<uint64_t>(r) * row, row);
  }
}

}  // namespace

void CopyBox(const DemoArray& a, const DemoBox& box, uint8_t* out) {
  ForEachRow(a, box, [&](uint64_t src, uint64_t dst, uint64_t n) {
    std::memcpy(out + dst, a.data.get() + src, n);
  });
}

bool BoxEquals(const DemoArray& a, const DemoBox& box, const uint8_t* got) {
  bool same = true;
  ForEachRow(a, box, [&](uint64_t src, uint64_t dst, uint64_t n) {
    same = same && std::memcmp(got + dst, a.data.get() + src, n) == 0;
  });
  return same;
}

}  // namespace cairn::cli
