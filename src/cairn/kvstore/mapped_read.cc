#include "cairn/kvstore/mapped_read.h"

#include <sys/mman.h>

namespace cairn {

MappedBytes::~MappedBytes() {
  if (map_base_ != nullptr && map_length_ != 0) ::munmap(map_base_, map_length_);
}

}  // namespace cairn
