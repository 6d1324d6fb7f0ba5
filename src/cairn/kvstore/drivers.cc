// The table of kvstore drivers and adapters (drivers.h): one row each.
#include "cairn/kvstore/drivers.h"

#include "cairn/kvstore/file/file_url.h"
#include "cairn/kvstore/gcs/gcs_url.h"
#include "cairn/kvstore/memory/memory_url.h"
#include "cairn/kvstore/ocdbt/io/ocdbt_url.h"
#include "cairn/kvstore/s3/s3_url.h"

namespace cairn {
namespace {

//                                scheme     folder    open              bucket spec_is_path
constexpr KvStoreDriver kDrivers[] = {
    {"file", "file", OpenFileUrl, false, true},
    {"memory", "memory", OpenMemoryUrl, false, true},
    {"s3", "s3", s3::OpenS3Url, true, false},
    {"gs", "gcs", gcs::OpenGcsUrl, true, false},
};

constexpr KvStoreAdapter kAdapters[] = {
    {"ocdbt", "ocdbt", ocdbt::OpenOcdbtUrl},
};

}  // namespace

std::span<const KvStoreDriver> KvStoreDrivers() { return kDrivers; }
std::span<const KvStoreAdapter> KvStoreAdapters() { return kAdapters; }

}  // namespace cairn
