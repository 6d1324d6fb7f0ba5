// --params-only and --rename-preset in the conversion plan.
#include "cairn/engine/convert/rename_presets.h"

#include <gtest/gtest.h>

#include <map>

#include "cairn/engine/convert/convert_plan.h"

namespace cairn::engine {
namespace {

using layout::ArrayInfo;

ArrayInfo Info(std::string path, Shape shape) {
  return ArrayInfo{path, DType::kFloat32, shape, shape, 0, layout::SplitTreePath(path, '.')};
}

// dest path -> source path.
std::map<std::string, std::string> Names(const std::vector<ArrayMapping>& plan) {
  std::map<std::string, std::string> out;
  for (const ArrayMapping& m : plan) out[m.dest.path] = m.source.path;
  return out;
}

TEST(ParamsOnly, KeepsTheParamsSubtreeAndDropsItsKey) {
  // A flax TrainState (params, opt_state with adam's mu over the same tree, step).
  std::vector<ArrayInfo> source = {
      Info("params.dense.kernel", {4, 8}), Info("params.dense.bias", {8}),
      Info("opt_state.0.mu.params.dense.kernel", {4, 8}), Info("opt_state.0.count", {}),
      Info("step", {}), Info("paramsx.w", {2})};
  ConvertPlanOptions o;
  o.params_only = true;
  auto plan = PlanConversion(source, o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(Names(*plan), (std::map<std::string, std::string>{
                              {"dense.bias", "params.dense.bias"},
                              {"dense.kernel", "params.dense.kernel"}}));
  EXPECT_EQ((*plan)[1].dest.tree_path, (std::vector<std::string>{"dense", "kernel"}));
  // MaxText: the flax variables dict under the field: both `params` go.
  auto maxtext = PlanConversion({Info("params.params.decoder.w", {2}), Info("step", {})}, o);
  ASSERT_TRUE(maxtext.ok());
  EXPECT_EQ(Names(*maxtext), (std::map<std::string, std::string>{{"decoder.w", "params.params.decoder.w"}}));
  // Sources without tree paths (safetensors) match on the name.
  ArrayInfo flat{"params.w", DType::kFloat32, {2}, {2}, 0, {}};
  auto st = PlanConversion({flat}, o);
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->at(0).dest.path, "w");
  // Nothing under params: the error says params-only selected nothing.
  auto none = PlanConversion({Info("step", {})}, o);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("params-only"), std::string_view::npos) << none.status().ToString();
}

TEST(ParamsOnly, RunsBeforeUserRenames) {
  ConvertPlanOptions o;
  o.params_only = true;
  o.renames = {{"transformer.", ""}};
  auto plan = PlanConversion({Info("params.transformer.wte.embedding", {4, 2})}, o);
  ASSERT_TRUE(plan.ok());
  EXPECT_EQ(plan->at(0).dest.path, "wte.embedding");
}

std::vector<ArrayInfo> FlaxGpt2(bool dense_layout) {
  const Index e = 8;
  std::vector<ArrayInfo> a = {
      Info("params.transformer.wte.embedding", {16, e}),
      Info("params.transformer.wpe.embedding", {4, e}),
      Info("params.transformer.ln_f.scale", {e}),
      Info("params.transformer.ln_f.bias", {e}),
      Info("params.transformer.h.0.ln_1.scale", {e}),
      Info("params.transformer.h.0.attn.c_attn.kernel", dense_layout ? Shape{e, 3 * e} : Shape{3 * e, e}),
      Info("params.transformer.h.0.attn.c_attn.bias", {3 * e}),
      Info("params.transformer.h.0.mlp.c_fc.kernel", dense_layout ? Shape{e, 4 * e} : Shape{4 * e, e}),
      Info("opt_state.0.mu.transformer.h.0.mlp.c_fc.kernel", {e, 4 * e}),
      Info("step", {})};
  return a;
}

TEST(RenamePreset, Gpt2GivesTransformersNames) {
  auto preset = FindRenamePreset("gpt2");
  ASSERT_TRUE(preset.ok());
  ConvertPlanOptions o;
  o.params_only = true;
  o.preset = (*preset)->rules;
  o.preset_adjust = (*preset)->adjust;
  auto plan = PlanConversion(FlaxGpt2(true), o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(Names(*plan), (std::map<std::string, std::string>{
      {"transformer.wte.weight", "params.transformer.wte.embedding"},
      {"transformer.wpe.weight", "params.transformer.wpe.embedding"},
      {"transformer.ln_f.weight", "params.transformer.ln_f.scale"},
      {"transformer.ln_f.bias", "params.transformer.ln_f.bias"},
      {"transformer.h.0.ln_1.weight", "params.transformer.h.0.ln_1.scale"},
      {"transformer.h.0.attn.c_attn.weight", "params.transformer.h.0.attn.c_attn.kernel"},
      {"transformer.h.0.attn.c_attn.bias", "params.transformer.h.0.attn.c_attn.bias"},
      {"transformer.h.0.mlp.c_fc.weight", "params.transformer.h.0.mlp.c_fc.kernel"}}));
  // A user rename sees the preset's names.
  o.renames = {{"transformer.", ""}};
  auto bare = PlanConversion(FlaxGpt2(true), o);
  ASSERT_TRUE(bare.ok());
  EXPECT_EQ(Names(*bare).count("h.0.attn.c_attn.weight"), 1u);
}

TEST(RenamePreset, Gpt2TransposesFlaxConv1DKernelsOnly) {
  auto preset = FindRenamePreset("gpt2");
  ASSERT_TRUE(preset.ok());
  ConvertPlanOptions o;
  o.params_only = true;
  o.preset = (*preset)->rules;
  o.preset_adjust = (*preset)->adjust;
  // nn.Dense layout ([in, out], as PyTorch's Conv1D): nothing transposed.
  auto dense = PlanConversion(FlaxGpt2(true), o);
  ASSERT_TRUE(dense.ok()) << dense.status().ToString();
  for (const ArrayMapping& m : *dense) EXPECT_TRUE(m.source_axes.empty()) << m.dest.path;
  // transformers' FlaxConv1D ([out, in]): every kernel, and only kernels.
  auto conv = PlanConversion(FlaxGpt2(false), o);
  ASSERT_TRUE(conv.ok()) << conv.status().ToString();
  std::map<std::string, Shape> transposed;
  for (const ArrayMapping& m : *conv) {
    if (!m.source_axes.empty()) transposed[m.dest.path] = m.dest.shape;
  }
  EXPECT_EQ(transposed, (std::map<std::string, Shape>{{"transformer.h.0.attn.c_attn.weight", {8, 24}},
                                                      {"transformer.h.0.mlp.c_fc.weight", {8, 32}}}));
  // Neither layout: refused, naming the array.
  auto odd = FlaxGpt2(true);
  odd[5].shape = odd[5].write_shape = {8, 20};
  auto refused = PlanConversion(odd, o);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("`params.transformer.h.0.attn.c_attn.kernel` has shape [8, 20]"),
            std::string_view::npos) << refused.status().ToString();
}

TEST(RenamePreset, LlamaGivesPyTorchNamesAndLinearLayouts) {
  auto preset = FindRenamePreset("llama");
  ASSERT_TRUE(preset.ok());
  ConvertPlanOptions o;
  o.params_only = true;
  o.preset = (*preset)->rules;
  o.preset_adjust = (*preset)->adjust;
  const Index e = 8, f = 24, v = 32;
  auto plan = PlanConversion({Info("params.model.embed_tokens.embedding", {v, e}),
                              Info("params.model.layers.0.self_attn.q_proj.kernel", {e, e}),
                              Info("params.model.layers.0.self_attn.k_proj.kernel", {e, e / 2}),
                              Info("params.model.layers.0.mlp.down_proj.kernel", {f, e}),
                              Info("params.model.layers.0.input_layernorm.weight", {e}),
                              Info("params.model.norm.weight", {e}),
                              Info("params.lm_head.kernel", {e, v}),
                              Info("opt_state.0.mu.lm_head.kernel", {e, v})},
                             o);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  std::map<std::string, Shape> shapes;
  std::map<std::string, bool> transposed;
  for (const ArrayMapping& m : *plan) {
    shapes[m.dest.path] = m.dest.shape;
    transposed[m.dest.path] = !m.source_axes.empty();
  }
  EXPECT_EQ(shapes, (std::map<std::string, Shape>{
                        {"model.embed_tokens.weight", {v, e}},
                        {"model.layers.0.self_attn.q_proj.weight", {e, e}},
                        {"model.layers.0.self_attn.k_proj.weight", {e / 2, e}},
                        {"model.layers.0.mlp.down_proj.weight", {e, f}},
                        {"model.layers.0.input_layernorm.weight", {e}},
                        {"model.norm.weight", {e}},
                        {"lm_head.weight", {v, e}}}));
  EXPECT_EQ(transposed, (std::map<std::string, bool>{{"model.embed_tokens.weight", false},
                                                     {"model.layers.0.self_attn.q_proj.weight", true},
                                                     {"model.layers.0.self_attn.k_proj.weight", true},
                                                     {"model.layers.0.mlp.down_proj.weight", true},
                                                     {"model.layers.0.input_layernorm.weight", false},
                                                     {"model.norm.weight", false},
                                                     {"lm_head.weight", true}}));
}

TEST(RenamePreset, LlamaRefusesKernelsOfAnotherRank) {
  // MaxText's DenseGeneral query kernel: [embed, heads, head_dim].
  auto preset = FindRenamePreset("llama");
  ASSERT_TRUE(preset.ok());
  ConvertPlanOptions o;
  o.preset = (*preset)->rules;
  o.preset_adjust = (*preset)->adjust;
  auto plan = PlanConversion({Info("decoder.layers.self_attention.query.kernel", {8, 2, 4})}, o);
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("kernel `decoder.layers.self_attention.query.kernel` has shape [8, 2, 4]"),
            std::string_view::npos) << plan.status().ToString();
}

TEST(RenamePreset, UnknownNamesListTheKnownOnes) {
  auto p = FindRenamePreset("gtp2");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find("unknown rename preset `gtp2` (presets: gpt2, llama)"), std::string_view::npos)
      << p.status().ToString();
}

}  // namespace
}  // namespace cairn::engine
