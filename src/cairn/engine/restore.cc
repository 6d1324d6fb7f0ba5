#include "cairn/engine/restore.h"

#include <memory>

#include "cairn/layout/orbax/item_store.h"
#include "cairn/layout/orbax/location.h"
#include "cairn/util/thread_pool.h"

namespace cairn::engine {

Status Restore(const RestoreRequest& request) {
  CAIRN_ASSIGN_OR_RETURN(orbax::Location where, orbax::OpenLocation(request.directory));
  CAIRN_ASSIGN_OR_RETURN(orbax::Location item_location,
                         orbax::ResolveItemLocation(where, request.item_name));
  CAIRN_ASSIGN_OR_RETURN(orbax::OrbaxItem item, orbax::OpenItem(item_location));
  const std::string dir = item_location.Path();
  // Open every array (metadata reads) in parallel, then read every box.
  std::vector<std::shared_ptr<ZarrArray>> arrays(request.arrays.size());
  {
    TaskGroup group;
    for (size_t i = 0; i < request.arrays.size(); ++i) {
      group.Run([&, i]() -> Status {
        const ArrayToRestore& a = request.arrays[i];
        CAIRN_ASSIGN_OR_RETURN(arrays[i], orbax::OpenItemArray(item, a.param));
        if (a.dtype && *a.dtype != arrays[i]->dtype()) {
          return InvalidArgumentError("restoring `" + a.param + "` of " + dir + ": stored dtype " +
                                      std::string(DTypeName(arrays[i]->dtype())) + ", requested " +
                                      std::string(DTypeName(*a.dtype)));
        }
        return Status::OK();
      });
    }
    CAIRN_RETURN_IF_ERROR(group.Wait());
  }
  TaskGroup group;
  for (size_t i = 0; i < request.arrays.size(); ++i) {
    for (const BoxToRestore& b : request.arrays[i].boxes) {
      group.Run([&, i]() -> Status {
        StridedLayout layout{b.byte_strides};
        return arrays[i]->Read(b.box, b.data, layout)
            .Annotate("restoring `" + request.arrays[i].param + "` of " + dir);
      });
    }
  }
  return group.Wait();
}

}  // namespace cairn::engine
