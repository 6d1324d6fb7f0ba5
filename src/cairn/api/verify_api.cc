// include/cairn/inspect.h, `verify`: every stored byte of a checkpoint.
// Orbax through the layout's verifier (layout/inspect/verify.h); AXLearn
// and safetensors through the checkpoint-format interface
// (CheckpointReader::VerifyStored); an AXLearn checkpoint that does not
// open is damage, reported as one "unreadable_checkpoint" problem.
#include <string>
#include <vector>

#include "cairn/api/inspect_common.h"
#include "cairn/inspect.h"
#include "cairn/layout/inspect/verify.h"
#include "cairn/layout/orbax/location.h"

namespace cairn {
namespace {

Result<VerifyReport> VerifyOtherFormat(layout::OpenedCheckpoint& opened, const InspectProgress& progress) {
  VerifyReport report;
  report.path = opened.location;
  report.format = opened.format;
  CAIRN_ASSIGN_OR_RETURN(
      layout::VerifyStoredStats stats,
      opened.reader->VerifyStored(
          [&](layout::StoredProblem p) {
            report.problems.push_back({std::move(p.kind), std::move(p.array), std::move(p.key),
                                       std::move(p.url), std::move(p.message)});
          },
          [&progress](uint64_t done, uint64_t total) {
            if (progress) progress(done, total);
          }));
  report.arrays = stats.arrays;
  report.chunks = stats.pieces;
  report.bytes = stats.bytes;
  return report;
}

VerifyReport Unopenable(const std::string& address, const Status& status) {
  VerifyReport report;
  report.path = address;
  report.problems.push_back({"unreadable_checkpoint", "", "", address, status.ToString()});
  return report;
}

}  // namespace

Result<VerifyReport> VerifyCheckpoint(const std::string& address, const InspectProgress& progress) {
  CAIRN_RETURN_IF_ERROR(api::CheckExists(address));
  if (auto other = api::OpenOtherFormat(address)) {
    if (!other->ok()) return Unopenable(address, other->status());
    return VerifyOtherFormat(**other, progress);
  }
  auto loc = orbax::OpenLocation(address);
  if (!loc.ok()) return api::NoCheckpoint(address, loc.status());
  inspect::VerifyOptions options;
  if (progress) options.progress = progress;
  auto verified = inspect::VerifyCheckpoint(*loc, options);
  if (!verified.ok()) return api::NoCheckpoint(address, verified.status());
  inspect::VerifyReport& r = *verified;
  VerifyReport report;
  report.path = r.path;
  report.format = "orbax";
  report.items = r.items;
  report.arrays = r.arrays;
  report.chunks = r.chunks;
  report.bytes = r.bytes_read;
  for (inspect::Problem& p : r.problems) {
    report.problems.push_back({std::move(p.kind), std::move(p.array), std::move(p.key),
                               std::move(p.file), std::move(p.message)});
  }
  for (inspect::Problem& p : r.warnings) {
    report.warnings.push_back({std::move(p.kind), std::move(p.array), std::move(p.key),
                               std::move(p.file), std::move(p.message)});
  }
  return report;
}

std::string ToString(const VerifyReport& report, const VerifyProblem& p) {
  if (report.format == "orbax") {
    std::string s = p.kind + ":";
    if (!p.array.empty()) s += " array `" + p.array + "`";
    if (!p.key.empty()) s += " key `" + p.key + "`";
    if (!p.file.empty()) s += " file " + p.file;
    return s + ": " + p.message;
  }
  if (report.format.empty()) return p.kind + ": " + p.file + ": " + p.message;
  return p.kind + ": array " + p.array + ", key " + (p.key.empty() ? "-" : p.key) + ", " +
         (p.file.empty() ? report.path : p.file) + ": " + p.message;
}

std::string ToJson(const VerifyReport& report) {
  auto rows = [](const std::vector<VerifyProblem>& list) {
    Json out = Json::array();
    for (const VerifyProblem& p : list) {
      out.push_back({{"kind", p.kind}, {"array", p.array}, {"key", p.key}, {"file", p.file},
                     {"message", p.message}});
    }
    return out;
  };
  Json j = {{"path", report.path}, {"ok", report.ok()}, {"problems", rows(report.problems)},
            {"warnings", rows(report.warnings)}};
  if (report.format == "orbax") {
    j["items"] = report.items;
    j["arrays"] = report.arrays;
    j["chunks"] = report.chunks;
    j["bytes_read"] = report.bytes;
  } else if (!report.format.empty()) {
    j["format"] = report.format;
    j["arrays"] = report.arrays;
    j["chunks"] = report.chunks;
    j["bytes_checked"] = report.bytes;
  }
  return api::JsonLine(j);
}

}  // namespace cairn
