#include "cairn/engine/convert/rename_presets.h"

namespace cairn::engine {
namespace {

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The last key of the array's source path: "kernel", "scale", ...
std::string SourceLeaf(const ArrayMapping& m) {
  if (!m.source.tree_path.empty()) return m.source.tree_path.back();
  const size_t cut = m.source.path.find_last_of("./");
  return cut == std::string::npos ? m.source.path : m.source.path.substr(cut + 1);
}

std::string ShapeText(const Shape& s) {
  std::string out = "[";
  for (size_t d = 0; d < s.size(); ++d) out += (d ? ", " : "") + std::to_string(s[d]);
  return out + "]";
}

// The rule of transformers' flax -> PyTorch conversion: a Dense kernel
// ([in, out]) becomes a Linear weight ([out, in]). A kernel of another rank
// (MaxText's DenseGeneral keeps [embed, heads, head_dim]) would need a
// reshape that no preset does: refused, naming it.
Status TransposeDenseKernels(std::vector<ArrayMapping>& plan, std::string_view preset) {
  for (ArrayMapping& m : plan) {
    if (SourceLeaf(m) != "kernel") continue;
    if (m.source.shape.size() != 2) {
      return Status(StatusCode::kInvalidArgument,
                    "rename preset " + std::string(preset) + ": kernel `" + m.source.path +
                        "` has shape " + ShapeText(m.source.shape) +
                        ", not [in, out]: the preset serves the 2-d kernels of flax's nn.Dense; "
                        "a kernel of another rank (a DenseGeneral's, a convolution's) needs a "
                        "reshape that cairn convert does not do");
    }
    CAIRN_RETURN_IF_ERROR(TransposeMapping(m, {1, 0}));
  }
  return Status::OK();
}

// GPT-2: the module names of transformers' Flax GPT-2 (`transformer.wte`,
// `transformer.h.<i>.attn.c_attn`, `.ln_1`, `.mlp.c_fc`, `transformer.ln_f`,
// ...) with the leaf names flax gives them (`kernel`, `bias`, `scale`,
// `embedding`) become the names of transformers' PyTorch GPT2LMHeadModel
// (`weight`, `bias`). PyTorch's GPT-2 keeps its Conv1D weights as
// [in, out]. A tree built with flax's nn.Dense keeps its kernels [in, out]
// too: nothing is transposed. transformers' own FlaxConv1D keeps them
// [out, in] (its flax -> PyTorch conversion transposes every kernel): then
// every kernel is transposed. The layout is told by `c_attn`'s kernel:
// [n_embd, 3 * n_embd] or [3 * n_embd, n_embd]; any other shape is refused,
// naming the array. The language-model head is tied to `wte` (GPT-2's
// default), so there is no `lm_head` to rename.
Status AdjustGpt2(std::vector<ArrayMapping>& plan) {
  for (const ArrayMapping& m : plan) {
    if (!EndsWith(m.dest.path, ".attn.c_attn.weight") || m.source.shape.size() != 2) continue;
    const auto& s = m.source.shape;
    if (s[1] == 3 * s[0]) return Status::OK();  // [embed, 3 * embed]: nn.Dense's [in, out]
    if (s[0] == 3 * s[1]) return TransposeDenseKernels(plan, "gpt2");  // FlaxConv1D's [out, in]
    return Status(StatusCode::kInvalidArgument,
                  "rename preset gpt2: array `" + m.source.path + "` has shape " + ShapeText(s) +
                      ", neither [n_embd, 3 * n_embd] (nn.Dense's [in, out]) nor "
                      "[3 * n_embd, n_embd] (transformers' FlaxConv1D's [out, in])");
  }
  return Status::OK();
}

// Llama and Mistral (tested against transformers): the names of transformers'
// Flax models (`model.embed_tokens`, `model.layers.<i>.self_attn.q_proj`,
// `.mlp.gate_proj`, `.input_layernorm`, `model.norm`, `lm_head`) become
// those of its PyTorch models: `.kernel`/`.embedding` -> `.weight` (the
// RMS norms' `weight` stays), and every Dense kernel is transposed to a
// Linear weight. The rotary embedding needs no permutation: both
// implementations rotate halves.
Status AdjustLlama(std::vector<ArrayMapping>& plan) { return TransposeDenseKernels(plan, "llama"); }

}  // namespace

const std::vector<RenamePreset>& RenamePresets() {
  static const auto* const kPresets = new std::vector<RenamePreset>{
      {"gpt2",
       "flax GPT-2 (transformers' Flax module names; nn.Dense [in, out] or FlaxConv1D [out, in] "
       "kernels) to transformers' GPT2LMHeadModel: .kernel/.scale/.embedding -> .weight",
       {{".kernel", ".weight", true}, {".scale", ".weight", true}, {".embedding", ".weight", true}},
       &AdjustGpt2},
      {"llama",
       "flax Llama, Mistral (transformers' Flax module names) to transformers' "
       "PyTorch models: .kernel/.embedding -> .weight, Dense kernels transposed to [out, in]",
       {{".kernel", ".weight", true}, {".scale", ".weight", true}, {".embedding", ".weight", true}},
       &AdjustLlama},
  };
  return *kPresets;
}

Result<const RenamePreset*> FindRenamePreset(std::string_view name) {
  std::string known;
  for (const RenamePreset& p : RenamePresets()) {
    if (p.name == name) return &p;
    known += (known.empty() ? "" : ", ") + std::string(p.name);
  }
  return Status(StatusCode::kInvalidArgument,
                "unknown rename preset `" + std::string(name) + "` (presets: " + known + ")");
}

}  // namespace cairn::engine
