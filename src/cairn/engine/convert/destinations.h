// The conversion destinations: one table row per format a checkpoint can be
// converted to, as layout/open_checkpoint.h detects the formats it reads.
// ConvertCheckpoint looks the requested format up here, and the CLI lists
// its choices from here, so a new destination format is one new file (its
// Prepare function) and one row in destinations.cc.
//
// A row's Prepare runs on every process before any array is converted: it
// checks the destination (the primary refuses a committed checkpoint unless
// `overwrite`), and fills in the writer factories, the reader of what was
// written (for verify) and where the result is.
//
// Thread safety: the table is immutable.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "cairn/engine/convert/convert.h"
#include "cairn/engine/convert/convert_checkpoint.h"
#include "cairn/layout/open_checkpoint.h"

namespace cairn::engine {

// What a destination's Prepare reads and fills in.
struct DestinationContext {
  const ConvertCheckpointRequest& request;
  std::shared_ptr<KvStore> source_store;
  const layout::OpenedCheckpoint& opened;
  const Location& dest;
  bool primary = true;                // the process that checks and commits
  ConvertOptions& options;            // the destination sets plan.dest_separator
  WriterFactory& make_writer;         // creates the destination (or resumes it)
  WriterFactory& attach_writer;       // joins the primary's (other processes)
  ReaderFactory& open_dest;           // reads what was written (verify)
  ConvertCheckpointResult& result;    // dest_location

  // The destination's directory as a key prefix: "" or ending in '/'.
  std::string DirPrefix() const;
};

struct DestinationFormat {
  std::string_view name;  // the value of `--to` / ConvertCheckpointRequest::to
  Status (*prepare)(DestinationContext& context);
  // A re-run of an interrupted conversion keeps the arrays it completed
  // (its writer answers CheckpointWriter::ArrayComplete); false: it writes
  // everything again (safetensors is written front to back).
  bool resumes = false;
};

// The table, in the order `cairn convert --help` lists it.
const std::vector<DestinationFormat>& DestinationFormats();
// The row named `name`. Errors: InvalidArgument naming `name` and every
// supported destination.
Result<const DestinationFormat*> FindDestinationFormat(std::string_view name);
std::vector<std::string> DestinationFormatNames();

// The rows' Prepare functions (one file each).
Status PrepareSafetensorsDestination(DestinationContext& context);
Status PrepareAxlearnDestination(DestinationContext& context);
Status PrepareOrbaxDestination(DestinationContext& context, bool use_zarr3);

// Helpers the destinations share.
// The primary's refusal of a committed destination: AlreadyExists naming
// the first of `markers` that exists, unless `overwrite` (then the marker
// is deleted first, so the old checkpoint stops looking valid).
Status RefuseCommitted(KvStore& store, const std::vector<std::string>& markers, bool overwrite);
// Names a conversion (its source, destination and planned arrays) with 16
// hex digits: a re-run of the same conversion finds what it left.
std::string ConversionId(const std::string& what, const std::vector<layout::ArrayInfo>& arrays);
// Copies each {source key, relative path} to `dest_prefix` + path.
Status CopyIteratorFiles(KvStore& source, const std::vector<std::pair<std::string, std::string>>& files,
                         KvStore& dest, const std::string& dest_prefix);

}  // namespace cairn::engine
