#include "cairn/kvstore/ocdbt/io/batch_read.h"

#include <algorithm>

namespace cairn::ocdbt {
namespace {

struct Run {
  const DataFileId* file;
  uint64_t begin;
  uint64_t end;
  std::vector<size_t> members;  // indexes into values
};

}  // namespace

Result<std::vector<SharedBytes>> ReadValues(const std::vector<LeafValue>& values,
                                            const ReadObjectFn& read, ThreadPool& pool) {
  std::vector<SharedBytes> out(values.size());
  // Inline values: one arena for all of them.
  size_t inline_total = 0;
  for (const auto& v : values) inline_total += v.is_inline ? v.inline_value.size() : 0;
  auto arena = std::make_shared<std::string>();
  arena->reserve(inline_total);
  std::vector<size_t> order;
  for (size_t i = 0; i < values.size(); ++i) {
    const LeafValue& v = values[i];
    if (v.is_inline) {
      out[i].size = v.inline_value.size();
      out[i].data = reinterpret_cast<const uint8_t*>(arena->data()) + arena->size();
      arena->append(v.inline_value);
      out[i].owner = arena;
    } else if (v.ref.length > 0) {
      order.push_back(i);
    }
  }
  // Out-of-line values in file order, grouped into runs.
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const auto& x = values[a].ref;
    const auto& y = values[b].ref;
    if (x.file_id != y.file_id) return x.file_id < y.file_id;
    return x.offset < y.offset;
  });
  std::vector<Run> runs;
  for (size_t i : order) {
    const IndirectDataReference& r = values[i].ref;
    if (r.offset > UINT64_MAX - r.length) {
      return DataLossError("value reference " + r.ToString() + " overflows");
    }
    const uint64_t end = r.offset + r.length;
    if (!runs.empty()) {
      Run& last = runs.back();
      bool same_file = *last.file == r.file_id;
      bool close = r.offset <= last.end + kCoalesceGapBytes;
      bool fits = std::max(end, last.end) - last.begin <= kCoalesceMaxBytes;
      if (same_file && close && fits) {
        last.end = std::max(last.end, end);
        last.members.push_back(i);
        continue;
      }
    }
    runs.push_back({&r.file_id, r.offset, end, {i}});
  }
  TaskGroup group(pool);
  for (const Run& run : runs) {
    group.Run([&run, &values, &out, &read]() -> Status {
      CAIRN_ASSIGN_OR_RETURN(Buffer bytes, read(*run.file, run.begin, run.end - run.begin));
      auto owner = std::make_shared<Buffer>(std::move(bytes));
      for (size_t i : run.members) {
        const IndirectDataReference& r = values[i].ref;
        out[i] = {owner, owner->data() + (r.offset - run.begin), static_cast<size_t>(r.length)};
      }
      return Status::OK();
    });
  }
  CAIRN_RETURN_IF_ERROR(group.Wait());
  return out;
}

}  // namespace cairn::ocdbt
