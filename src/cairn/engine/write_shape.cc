#include "cairn/engine/write_shape.h"

#include "cairn/layout/orbax/tree_metadata.h"

namespace cairn::engine {

Shape ReplicatedWriteShape(const Shape& shape, int process_count) {
  Shape write = shape;
  if (process_count <= 1) return write;
  for (size_t axis = 0; axis < shape.size(); ++axis) {
    if (shape[axis] > 0 && shape[axis] % process_count == 0) {
      write[axis] = shape[axis] / process_count;
      break;
    }
  }
  return write;
}

Result<WriteLayout> WriteLayoutOf(std::string_view value_type, const Shape& shape,
                                  const std::vector<Box>& device_boxes, int process_count,
                                  const std::string& where) {
  if (process_count < 1) {
    return InvalidArgumentError(where + ": process count " + std::to_string(process_count) +
                                " is less than 1");
  }
  WriteLayout out;
  if (value_type == orbax::kJaxArray) {
    if (device_boxes.empty()) return InvalidArgumentError(where + ": a jax.Array's sharding has no device");
    for (const Box& b : device_boxes) {
      if (b.origin.size() != shape.size() || b.shape.size() != shape.size()) {
        return InvalidArgumentError(where + ": device box " + b.ToString() + " does not have the rank of shape " +
                                    Box::FromShape(shape).ToString());
      }
    }
    out.write_shape = device_boxes.front().shape;
    out.num_replicas = 0;
    for (const Box& b : device_boxes) out.num_replicas += b == device_boxes.front();
    return out;
  }
  if (value_type == orbax::kNumpyArray || value_type == orbax::kScalar) {
    out.write_shape = ReplicatedWriteShape(shape, process_count);
    out.num_replicas = process_count;
  }
  return out;
}

}  // namespace cairn::engine
