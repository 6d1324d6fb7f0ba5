// Rename presets: named tables of rename rules that turn a jax/flax model's
// parameter names into the names another framework's loader expects
// (`cairn convert --rename-preset NAME`, `cairn.convert(rename_preset=...)`),
// and transpose the arrays whose layout differs between the two (a flax
// Dense kernel is [in, out], a PyTorch Linear weight [out, in]).
//
// The presets are registered in one table (rename_presets.cc): a new family
// is one row.
//
// Thread safety: the table is immutable.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cairn/engine/convert/convert_plan.h"
#include "cairn/result.h"
#include "cairn/status.h"

namespace cairn::engine {

struct RenamePreset {
  std::string_view name;         // the value of --rename-preset
  std::string_view description;  // one line for --help
  std::vector<RenameRule> rules;
  // Adjusts the planned arrays (destination paths already renamed): sets
  // the transposes (TransposeMapping) of the arrays whose layout differs,
  // or refuses, naming the array, a layout the preset cannot serve; null:
  // none.
  Status (*adjust)(std::vector<ArrayMapping>& plan) = nullptr;
};

// The table, in the order --help lists it.
const std::vector<RenamePreset>& RenamePresets();
// The row named `name`. Errors: InvalidArgument naming `name` and every
// preset.
Result<const RenamePreset*> FindRenamePreset(std::string_view name);

}  // namespace cairn::engine
