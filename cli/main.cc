// `cairn`: the command-line tool. Subcommands live in commands/<name>.cc;
// to add one, declare its Register function in commands/commands.h and list
// it in kCommands below.
//
// Before CLI11 parses, main handles what it would answer badly: no
// arguments (usage, exit 2), `help [COMMAND]`, and an unknown command (named,
// with the closest known one suggested, as git does). Every exit status
// follows kExitStatusHelp (cli_util.h); CLI11's own parse errors exit 2.
// The library's events are printed while a command runs (event_printer.h).
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli_util.h"
#include "commands/commands.h"
#include "event_printer.h"
#include "signals.h"

#ifndef CAIRN_VERSION
#error "CAIRN_VERSION is defined by cli/CMakeLists.txt from the CMake project's VERSION"
#endif

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

const CLI::App* FindCommand(const std::vector<cairn::cli::Command>& commands, const std::string& name) {
  for (const cairn::cli::Command& c : commands) {
    if (c.app->get_name() == name) return c.app;
  }
  return nullptr;
}

// "cairn: unknown command 'lst' (did you mean 'ls'?)", exit 2.
int UnknownCommand(const std::vector<cairn::cli::Command>& commands, const std::string& name) {
  std::vector<std::string> names = {"help"};
  for (const cairn::cli::Command& c : commands) names.push_back(c.app->get_name());
  const std::string near = cairn::cli::ClosestName(name, names);
  std::fprintf(stderr, "cairn: unknown command '%s'%s (see 'cairn --help')\n", name.c_str(),
               near.empty() ? "" : (" (did you mean '" + near + "'?)").c_str());
  return cairn::cli::kExitUsage;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("cairn: checkpoints for large-model training (zarr, OCDBT, Orbax), natively.\n"
               "Addresses are TensorStore pipeline URLs (file:///dir/, memory://x/, "
               "file:///dir/|ocdbt:, ...|zarr3:) or local paths.",
               "cairn");
  app.require_subcommand(1);
  app.set_version_flag("--version", "cairn " CAIRN_VERSION);
  // Set before the subcommands are added: each inherits it.
  app.footer(cairn::cli::kExitStatusHelp);
  std::vector<cairn::cli::Command> commands;
  bool verbose = false;
  for (RegisterFn add : kCommands) {
    commands.push_back(add(app));
    commands.back().app->add_flag("-v,--verbose", verbose,
                                  "also print what cairn decided on its own besides warnings "
                                  "(resumed arrays, ...)");
  }
  if (argc < 2) {
    std::fprintf(stderr, "%s", app.help().c_str());
    return cairn::cli::kExitUsage;
  }
  const std::string first = argv[1];
  if (first == "help") {
    if (argc == 2) {
      std::printf("%s", app.help().c_str());
      return cairn::cli::kExitOk;
    }
    const CLI::App* sub = FindCommand(commands, argv[2]);
    if (sub == nullptr) return UnknownCommand(commands, argv[2]);
    std::printf("%s", sub->help().c_str());
    return cairn::cli::kExitOk;
  }
  if (!first.empty() && first[0] != '-' && FindCommand(commands, first) == nullptr) {
    return UnknownCommand(commands, first);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every parse error is a usage error.
    return app.exit(e) == 0 ? cairn::cli::kExitOk : cairn::cli::kExitUsage;
  }
  for (const cairn::cli::Command& c : commands) {
    if (!c.app->parsed()) continue;
    // Until a command that writes installs its own (convert: signals.h).
    const cairn::cli::ExitOnSignal interrupted(c.app->get_name().c_str());
    const cairn::cli::EventPrinter events(c.app->get_name(), verbose);
    return c.run();
  }
  std::fprintf(stderr, "cairn: no command given (see 'cairn --help')\n");
  return cairn::cli::kExitUsage;
}
