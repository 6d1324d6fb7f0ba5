# ctest `installed_package`: installs the build into BUILD_DIR/installed, then
# configures, builds and runs examples/installed/ against that install, as a
# C++ user outside this repository would (find_package(cairn)).
set(prefix ${BUILD_DIR}/installed)
set(example ${BUILD_DIR}/installed-example)
file(REMOVE_RECURSE ${prefix} ${example})
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}\n${out}\n${err}")
  endif()
  message(STATUS "${out}")
endfunction()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} --component Unspecified)
# Only the public headers were installed, none of src/.
file(GLOB_RECURSE installed_headers RELATIVE ${prefix}/include ${prefix}/include/*)
foreach(h ${installed_headers})
  if(NOT h MATCHES "^cairn/[a-z_]+\\.h$")
    message(FATAL_ERROR "installed a header outside include/cairn/: ${h}")
  endif()
endforeach()
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/installed -B ${example} -G ${GENERATOR}
    -DCMAKE_CXX_COMPILER=${COMPILER} -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${example})
run(${example}/cairn_installed_example ${example}/ckpt/1)
