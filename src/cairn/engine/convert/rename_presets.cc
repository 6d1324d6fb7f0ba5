#include "cairn/engine/convert/rename_presets.h"

namespace cairn::engine {
namespace {

bool EndsWith(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// GPT-2: the module names of transformers' Flax GPT-2 (`transformer.wte`,
// `transformer.h.<i>.attn.c_attn`, `.ln_1`, `.mlp.c_fc`, `transformer.ln_f`,
// ...) with the leaf names flax gives them (`kernel`, `bias`, `scale`,
// `embedding`) become the names of transformers' PyTorch GPT2LMHeadModel
// (`weight`, `bias`). PyTorch's GPT-2 keeps its Conv1D weights as
// [in, out], as flax's nn.Dense keeps its kernels, so nothing is
// transposed. transformers' own FlaxConv1D keeps its kernels as [out, in]
// (and its flax->PyTorch conversion transposes every kernel): such a tree is
// refused by CheckGpt2Layout, naming the array, rather than written with
// transposed weights. The language-model head is tied to `wte` (GPT-2's
// default), so there is no `lm_head` to rename.
Status CheckGpt2Layout(const std::vector<ArrayMapping>& plan) {
  for (const ArrayMapping& m : plan) {
    if (!EndsWith(m.dest.path, ".attn.c_attn.weight") || m.source.shape.size() != 2) continue;
    const auto& s = m.source.shape;
    if (s[1] == 3 * s[0]) continue;  // [embed, 3 * embed]: nn.Dense's [in, out]
    return Status(StatusCode::kInvalidArgument,
                  "rename preset gpt2: array `" + m.source.path + "` has shape [" +
                      std::to_string(s[0]) + ", " + std::to_string(s[1]) +
                      "], not [n_embd, 3 * n_embd]: the preset serves kernels stored [in, out] "
                      "as flax's nn.Dense stores them; transformers' FlaxConv1D stores them "
                      "[out, in], which needs a transpose that cairn convert does not do");
  }
  return Status::OK();
}

}  // namespace

const std::vector<RenamePreset>& RenamePresets() {
  static const auto* const kPresets = new std::vector<RenamePreset>{
      {"gpt2",
       "flax GPT-2 (transformers' Flax module names, nn.Dense [in, out] kernels) to "
       "transformers' GPT2LMHeadModel: .kernel/.scale/.embedding -> .weight",
       {{".kernel", ".weight", true}, {".scale", ".weight", true}, {".embedding", ".weight", true}},
       &CheckGpt2Layout},
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
