# libFuzzer targets (CAIRN_FUZZ=ON, clang only).
#
# With CAIRN_FUZZ=ON every target of the build is compiled with
# -fsanitize=fuzzer-no-link,address,undefined (so the library code the
# fuzzers reach is instrumented), and every src/cairn/<layer>/**/*_fuzz.cc
# becomes an executable cairn_<name>_fuzz linked with -fsanitize=fuzzer and
# the library of its layer. The targets are declared at the end of the
# top-level CMakeLists.txt (deferred), after the layers exist.
#
# cairn_fuzz_target(NAME SOURCE DEPS libs...) declares one target by hand.
#
# All of them: cmake --build build/fuzz --target cairn_fuzzers.
# Running one: build/fuzz/cairn_ocdbt_decoders_fuzz -max_total_time=30 CORPUS_DIR SEED_DIR
# (scripts/test.sh does this for every target, seeded from tests/testdata).
function(cairn_fuzz_target name)
  cmake_parse_arguments(ARG "" "SOURCE" "DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCE})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS})
  target_compile_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_options(${name} PRIVATE -fsanitize=fuzzer,address,undefined)
  set_property(GLOBAL APPEND PROPERTY CAIRN_FUZZ_TARGETS ${name})
endfunction()

function(cairn_add_discovered_fuzz_targets)
  file(GLOB_RECURSE fuzz_srcs CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/cairn/*_fuzz.cc)
  foreach(src ${fuzz_srcs})
    file(RELATIVE_PATH rel ${PROJECT_SOURCE_DIR}/src/cairn ${src})
    string(REGEX MATCH "^[^/]+" layer ${rel})
    get_filename_component(stem ${src} NAME_WE)  # e.g. ocdbt_decoders_fuzz
    if(NOT TARGET cairn_${layer})
      message(FATAL_ERROR "fuzz target ${src}: no library cairn_${layer}")
    endif()
    cairn_fuzz_target(cairn_${stem} SOURCE ${src} DEPS cairn_${layer})
  endforeach()
  get_property(targets GLOBAL PROPERTY CAIRN_FUZZ_TARGETS)
  message(STATUS "cairn fuzz targets: ${targets}")
  # `cmake --build build/fuzz --target cairn_fuzzers` builds the fuzz targets
  # and the layers they link, not the layers no fuzzer reaches (engine,
  # emergency, dist, api: a third of the library's objects).
  add_custom_target(cairn_fuzzers DEPENDS ${targets})
endfunction()

if(CAIRN_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "CAIRN_FUZZ=ON needs clang (-DCMAKE_CXX_COMPILER=clang++)")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-omit-frame-pointer -g)
  add_link_options(-fsanitize=address,undefined)
  cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL cairn_add_discovered_fuzz_targets)
endif()
