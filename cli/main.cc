// `cairn`: the command-line tool. Subcommands live in commands/<name>.cc;
// to add one, declare its Register function in commands/commands.h and list
// it in kCommands below.
#include <cstdio>
#include <vector>

#include <CLI/CLI.hpp>

#include "commands/commands.h"
#include "signals.h"

namespace {

using RegisterFn = cairn::cli::Command (*)(CLI::App&);

// Every subcommand, in the order `cairn --help` lists them.
constexpr RegisterFn kCommands[] = {
    cairn::cli::RegisterDemo,
    cairn::cli::RegisterLs,
    cairn::cli::RegisterInfo,
    cairn::cli::RegisterVerify,
    cairn::cli::RegisterDiff,
    cairn::cli::RegisterConvert,
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("cairn: checkpoints for large-model training (zarr, OCDBT, Orbax), natively.\n"
               "Addresses are TensorStore pipeline URLs (file:///dir/, memory://x/, "
               "file:///dir/|ocdbt:, ...|zarr3:) or local paths.",
               "cairn");
  app.require_subcommand(1);
  std::vector<cairn::cli::Command> commands;
  for (RegisterFn add : kCommands) commands.push_back(add(app));
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (const cairn::cli::Command& c : commands) {
    if (!c.app->parsed()) continue;
    // Until a command that writes installs its own (convert: signals.h).
    const cairn::cli::ExitOnSignal interrupted(c.app->get_name().c_str());
    return c.run();
  }
  std::fprintf(stderr, "cairn: no subcommand given (see cairn --help)\n");
  return 2;
}
