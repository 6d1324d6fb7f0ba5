// The write-shape policy: the shape each leaf is written in (one chunk, or
// one v3 shard, per write shape) and how many replicas hold each piece, from
// how the leaf is held. The Python package hands over the facts (a
// jax.Array's per-device boxes, the process count) and this decides, so
// every front end saves a tree alike.
//
//   jax.Array      write shape: the box of the sharding's first device (the
//                  shard at the origin, the largest one when uneven: jax
//                  puts any remainder last); the same on every process,
//                  whichever shards it holds. Replicas: how many devices
//                  hold that box.
//   np.ndarray     every process holds the whole array (one replica each):
//                  split along the first axis the process count divides, so
//                  that each process's replica writes one slice
//                  (replica-parallel); else the whole shape.
//   scalar         write shape [], one replica per process.
//   other leaves   (strings, None, empty containers) nothing to write.
//
// Thread safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cairn/util/box.h"
#include "cairn/result.h"

namespace cairn::engine {

struct WriteLayout {
  Shape write_shape;  // empty: nothing to write, or a scalar
  int num_replicas = 1;
};

// `device_boxes`: every device's box of a jax.Array's sharding, in the
// sharding's device order (empty for other value types). InvalidArgument
// naming `where` when a jax.Array has no device box or a box of another
// rank than `shape`, or `process_count` < 1.
Result<WriteLayout> WriteLayoutOf(std::string_view value_type, const Shape& shape,
                                  const std::vector<Box>& device_boxes, int process_count,
                                  const std::string& where);

// The np.ndarray rule alone (see above).
Shape ReplicatedWriteShape(const Shape& shape, int process_count);

}  // namespace cairn::engine
