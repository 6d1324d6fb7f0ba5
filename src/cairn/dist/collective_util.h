// Small helpers shared by the coordinators of src/cairn/dist/.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "cairn/coordinator.h"

namespace cairn::dist {

using Clock = std::chrono::steady_clock;

// The deadline `timeout` from now; saturates instead of overflowing for huge
// timeouts (Duration::max() means "practically forever").
Clock::time_point DeadlineAfter(Coordinator::Duration timeout);

// Time left until `deadline`, never negative.
Coordinator::Duration TimeLeft(Clock::time_point deadline);

// "0.25 s", for error messages.
std::string FormatSeconds(Coordinator::Duration d);

// FNV-1a, 64 bits: identifies a collective's name between processes.
uint64_t HashName(std::string_view name);

}  // namespace cairn::dist
