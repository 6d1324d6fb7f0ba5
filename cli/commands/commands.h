// The `cairn` command's subcommands. Each lives in commands/<name>.cc and is
// listed once in main.cc's kCommands table.
//
// A subcommand's Register function adds its CLI11 subcommand (name, help,
// options) to the top-level app and returns a Command whose `run`, called
// after parsing when that subcommand was chosen, does the work and returns
// the process exit status (0 only on success; errors are printed to stderr,
// naming what failed).
#pragma once

#include <functional>

#include <CLI/CLI.hpp>

namespace cairn::cli {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command RegisterLs(CLI::App& app);
Command RegisterDemo(CLI::App& app);
Command RegisterInfo(CLI::App& app);
Command RegisterVerify(CLI::App& app);
Command RegisterDiff(CLI::App& app);
Command RegisterConvert(CLI::App& app);

}  // namespace cairn::cli
