// Prints the library's events (include/cairn/events.h: what cairn decided
// on its own, such as a dropped temporary step left by a killed save, a
// restore that fell back, arrays a conversion resumed) on stderr, as
// `cairn COMMAND: warning: ...` for warnings and, with --verbose,
// `cairn COMMAND: ...` for the rest. A progress bar on the screen is
// erased first; it is drawn again at its next update.
//
// Thread safety: events arrive on any thread; one line is printed at a
// time. Made and destroyed on the main thread, around the command.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>

#include "cairn/events.h"
#include "progress.h"

namespace cairn::cli {

class EventPrinter {
 public:
  EventPrinter(std::string command, bool verbose) {
    SetEventSink([command = std::move(command), verbose](EventLevel level, std::string_view message) {
      if (level != EventLevel::kWarning && !verbose) return;
      static std::mutex mu;
      std::lock_guard lock(mu);
      if (bar_on_screen.exchange(false) && isatty(STDERR_FILENO) == 1) std::fputs("\r\033[K", stderr);
      std::fprintf(stderr, "cairn %s: %s%.*s\n", command.c_str(),
                   level == EventLevel::kWarning ? "warning: " : "", static_cast<int>(message.size()),
                   message.data());
      std::fflush(stderr);
    });
  }
  ~EventPrinter() { SetEventSink({}); }
  EventPrinter(const EventPrinter&) = delete;
  EventPrinter& operator=(const EventPrinter&) = delete;
};

}  // namespace cairn::cli
