// Events: what cairn decided on its own that a user wants to hear about (a
// dropped interrupted step, a restore that fell back, a conversion that
// resumed arrays, a step deleted by retention). The library reports each
// one here once, as a sentence that names the path; the Python package
// passes them to logging.getLogger("cairn"), the CLI may print them.
//
// Thread safety: SetEventSink and EmitEvent may be called from any thread;
// the sink is called on the thread that reached the event (often a
// background thread of a save) and must not block for long.
#pragma once

#include <functional>
#include <string_view>

namespace cairn {

enum class EventLevel { kInfo, kWarning };

// Called with each event; empty: events are dropped (the default).
using EventSink = std::function<void(EventLevel level, std::string_view message)>;

// Installs `sink` for the whole process (replacing the previous one).
void SetEventSink(EventSink sink);

// Reports an event to the installed sink, if any.
void EmitEvent(EventLevel level, std::string_view message);

}  // namespace cairn
