# The layering rule (docs/ARCHITECTURE.md): a layer includes only the layers
# below it. Run at configure time (included by CMakeLists.txt) and as the
# ctest `layering` (cmake -DCAIRN_SOURCE_DIR=... -P cmake/check_layers.cmake),
# so an include that goes up a layer fails the build's tests even when the
# file set did not change.
#
# CAIRN_LAYER_ORDER lists the layers bottom up; dist sits beside the stack
# (it needs only util) and is listed before the engine that uses it. The
# front door (api/) is last: nothing under src/ may include it. The public
# headers (include/cairn/) include only one another and the standard library.
# The CLI (cli/) and the Python bindings include only the public headers plus
# the array and kvstore API.
set(CAIRN_LAYER_ORDER util dtype codec kvstore zarr layout dist engine emergency api)

function(cairn_check_layers source_dir)
  set(problems "")
  list(LENGTH CAIRN_LAYER_ORDER n)
  foreach(layer IN LISTS CAIRN_LAYER_ORDER)
    list(FIND CAIRN_LAYER_ORDER ${layer} own)
    file(GLOB_RECURSE files ${source_dir}/src/cairn/${layer}/*.h ${source_dir}/src/cairn/${layer}/*.cc)
    foreach(f IN LISTS files)
      file(STRINGS ${f} includes REGEX "^#include \"cairn/[a-z_]+/")
      foreach(line IN LISTS includes)
        string(REGEX REPLACE "^#include \"cairn/([a-z_]+)/.*" "\\1" target "${line}")
        list(FIND CAIRN_LAYER_ORDER ${target} index)
        if(index GREATER own)
          file(RELATIVE_PATH rel ${source_dir} ${f})
          list(APPEND problems "${rel} (layer ${layer}) includes layer ${target}: ${line}")
        endif()
      endforeach()
    endforeach()
  endforeach()
  # The public headers (include/cairn/) are self-contained: they include only
  # one another and the standard library, never a header under src/.
  file(GLOB public_headers ${source_dir}/include/cairn/*.h)
  foreach(f IN LISTS public_headers)
    file(STRINGS ${f} includes REGEX "^#include \"")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^#include \"([^\"]*)\".*" "\\1" target "${line}")
      if(NOT target MATCHES "^cairn/[a-z_]+\\.h$" OR NOT EXISTS ${source_dir}/include/${target})
        file(RELATIVE_PATH rel ${source_dir} ${f})
        list(APPEND problems "${rel} (public) includes a header that is not public: ${line}")
      endif()
    endforeach()
  endforeach()
  # The front door's clients (the CLI, the Python bindings) include only the
  # public headers plus the array and kvstore API they expose. One row per
  # client: a glob relative to the source directory.
  set(front_door_clients
      cli/*.h cli/*.cc
      python/src/*.h python/src/*.cc)
  set(client_allowed "^cairn/(zarr/array\\.h|zarr/array_url\\.h|dtype/dtype\\.h|util/box\\.h|kvstore/.+\\.h)$")
  set(client_files "")
  foreach(pattern IN LISTS front_door_clients)
    file(GLOB_RECURSE matched ${source_dir}/${pattern})
    list(APPEND client_files ${matched})
  endforeach()
  foreach(f IN LISTS client_files)
    file(STRINGS ${f} includes REGEX "^#include \"cairn/")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^#include \"([^\"]*)\".*" "\\1" target "${line}")
      if(target MATCHES "^cairn/[a-z_]+\\.h$" AND EXISTS ${source_dir}/include/${target})
        continue()  # public
      endif()
      if(NOT target MATCHES "${client_allowed}")
        file(RELATIVE_PATH rel ${source_dir} ${f})
        list(APPEND problems "${rel} (front-door client) includes an internal header: ${line}")
      endif()
    endforeach()
  endforeach()
  if(problems)
    list(JOIN problems "\n  " text)
    message(FATAL_ERROR "includes that go up a layer:\n  ${text}")
  endif()
endfunction()

if(CMAKE_SCRIPT_MODE_FILE AND CAIRN_SOURCE_DIR)
  cairn_check_layers(${CAIRN_SOURCE_DIR})
endif()
