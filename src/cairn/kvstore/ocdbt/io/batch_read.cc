#include "cairn/kvstore/ocdbt/io/batch_read.h"

#include <algorithm>

namespace cairn::ocdbt {
namespace {

struct Run {
  const DataFileId* file;
  uint64_t begin;
  uint64_t end;
  std::vector<size_t> members;  // indexes into parts
};

}  // namespace

Status StreamValues(const std::vector<ValuePart>& parts, const ReadObjectFn& read, ThreadPool& pool,
                    const ValuePartFn& fn) {
  std::vector<size_t> order;
  for (size_t i = 0; i < parts.size(); ++i) {
    const ValuePart& p = parts[i];
    if (p.value->is_inline || p.end == p.begin) {
      // Inline (or empty): the bytes are in the leaf already.
      const std::string& s = p.value->inline_value;
      const uint8_t* data = p.value->is_inline
                                ? reinterpret_cast<const uint8_t*>(s.data()) + p.begin
                                : nullptr;
      CAIRN_RETURN_IF_ERROR(fn(i, SharedBytes{nullptr, data, static_cast<size_t>(p.end - p.begin)}));
    } else {
      const IndirectDataReference& r = p.value->ref;
      if (r.offset > UINT64_MAX - r.length) {
        return DataLossError("value reference " + r.ToString() + " overflows");
      }
      order.push_back(i);
    }
  }
  // Out-of-line parts in file order, grouped into runs.
  auto abs_begin = [&](size_t i) { return parts[i].value->ref.offset + parts[i].begin; };
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto& x = parts[a].value->ref.file_id;
    const auto& y = parts[b].value->ref.file_id;
    if (x != y) return x < y;
    return abs_begin(a) < abs_begin(b);
  });
  std::vector<Run> runs;
  for (size_t i : order) {
    const DataFileId& file = parts[i].value->ref.file_id;
    const uint64_t begin = abs_begin(i);
    const uint64_t end = parts[i].value->ref.offset + parts[i].end;
    if (!runs.empty()) {
      Run& last = runs.back();
      const bool same_file = *last.file == file;
      const bool close = begin <= last.end + kCoalesceGapBytes;
      const bool fits = std::max(end, last.end) - last.begin <= kCoalesceMaxBytes;
      if (same_file && close && fits) {
        last.end = std::max(last.end, end);
        last.members.push_back(i);
        continue;
      }
    }
    runs.push_back({&file, begin, end, {i}});
  }
  TaskGroup group(pool);
  for (const Run& run : runs) {
    group.Run([&run, &parts, &read, &fn, &group, &abs_begin]() -> Status {
      if (group.failed()) return Status::OK();
      CAIRN_ASSIGN_OR_RETURN(Buffer bytes, read(*run.file, run.begin, run.end - run.begin));
      auto owner = std::make_shared<Buffer>(std::move(bytes));
      for (size_t i : run.members) {
        const size_t size = static_cast<size_t>(parts[i].end - parts[i].begin);
        CAIRN_RETURN_IF_ERROR(fn(i, SharedBytes{owner, owner->data() + (abs_begin(i) - run.begin), size}));
      }
      return Status::OK();
    });
  }
  return group.Wait();
}

Result<std::vector<SharedBytes>> ReadValues(const std::vector<LeafValue>& values,
                                            const ReadObjectFn& read, ThreadPool& pool) {
  std::vector<ValuePart> parts;
  parts.reserve(values.size());
  for (const LeafValue& v : values) parts.push_back({&v, 0, v.size()});
  // Inline values are copied into one arena the slices keep alive.
  size_t inline_total = 0;
  for (const auto& v : values) inline_total += v.is_inline ? v.inline_value.size() : 0;
  auto arena = std::make_shared<std::string>();
  arena->reserve(inline_total);
  std::vector<SharedBytes> out(values.size());
  std::mutex mu;
  CAIRN_RETURN_IF_ERROR(StreamValues(parts, read, pool, [&](size_t i, SharedBytes b) -> Status {
    if (b.owner == nullptr && b.size > 0) {
      std::lock_guard<std::mutex> lock(mu);  // inline parts come from this thread, before any run
      b.data = reinterpret_cast<const uint8_t*>(arena->data()) + arena->size();
      arena->append(values[i].inline_value);
      b.owner = arena;
    }
    out[i] = std::move(b);
    return Status::OK();
  }));
  return out;
}

}  // namespace cairn::ocdbt
