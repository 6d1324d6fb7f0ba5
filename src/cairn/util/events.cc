// The process's event sink (include/cairn/events.h).
#include "cairn/events.h"

#include <memory>
#include <mutex>
#include <utility>

namespace cairn {
namespace {

std::mutex& SinkMutex() {
  static std::mutex mu;
  return mu;
}

// Shared, so an event being delivered keeps the sink it started with alive
// while another thread replaces it.
std::shared_ptr<const EventSink>& Sink() {
  static std::shared_ptr<const EventSink> sink;
  return sink;
}

}  // namespace

void SetEventSink(EventSink sink) {
  auto next = sink ? std::make_shared<const EventSink>(std::move(sink)) : nullptr;
  std::lock_guard<std::mutex> lock(SinkMutex());
  Sink() = std::move(next);
}

void EmitEvent(EventLevel level, std::string_view message) {
  std::shared_ptr<const EventSink> sink;
  {
    std::lock_guard<std::mutex> lock(SinkMutex());
    sink = Sink();
  }
  if (sink) (*sink)(level, message);
}

}  // namespace cairn
