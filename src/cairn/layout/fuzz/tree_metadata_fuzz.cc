// libFuzzer target for the Orbax PyTree metadata file `_METADATA`.
//
// The input is parsed as `_METADATA`; what parses has its param names
// checked, its tree built (nesting as deep as the key paths say) and is
// emitted again, and the emitted text must parse. Parsing must return a
// Status, never crash, overflow the stack or allocate without bound; any
// other outcome is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "cairn/layout/orbax/tree_metadata.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace cairn::orbax;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = ParseTreeMetadata(text, "fuzz _METADATA");
  if (!parsed.ok()) return 0;
  (void)CheckParamNames(parsed->entries);
  (void)BuildTree(*parsed);
  for (const TreeEntry& e : parsed->entries) {
    (void)ParamName(e.path);
    (void)KeyString(e.path);
  }
  const std::string emitted = EmitTreeMetadata(*parsed);
  if (!ParseTreeMetadata(emitted, "fuzz _METADATA (emitted)").ok()) __builtin_trap();
  return 0;
}
