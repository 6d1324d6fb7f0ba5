# cairn_layer(NAME DEPS ...)
#
# Builds static library cairn_NAME from every .cc under src/cairn/NAME/
# (recursively) that is not a test (*_test.cc), a fuzz target (*_fuzz.cc) or
# test support (*/testing/*). Every *_test.cc of the layer goes into one
# GoogleTest binary cairn_NAME_test, registered with ctest, so no test file can
# silently drop out of the build. Test-support sources (testing/*.cc) are
# linked into that binary and into later layers' tests via cairn_NAME_testing.
function(cairn_layer name)
  cmake_parse_arguments(ARG "" "" "DEPS;TEST_DEPS" ${ARGN})
  set(dir ${PROJECT_SOURCE_DIR}/src/cairn/${name})
  file(GLOB_RECURSE all_cc CONFIGURE_DEPENDS ${dir}/*.cc)
  set(lib_srcs "")
  set(test_srcs "")
  set(testing_srcs "")
  foreach(f ${all_cc})
    if(f MATCHES "_test\\.cc$")
      list(APPEND test_srcs ${f})
    elseif(f MATCHES "_fuzz\\.cc$")
      # built by cairn_fuzz targets
    elseif(f MATCHES "/testing/")
      list(APPEND testing_srcs ${f})
    else()
      list(APPEND lib_srcs ${f})
    endif()
  endforeach()
  if(NOT lib_srcs)
    message(STATUS "cairn layer ${name}: no sources yet")
    return()
  endif()
  add_library(cairn_${name} STATIC ${lib_srcs})
  target_include_directories(cairn_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(cairn_${name} PUBLIC ${ARG_DEPS})
  if(CAIRN_BUILD_TESTS)
    if(testing_srcs)
      add_library(cairn_${name}_testing STATIC ${testing_srcs})
      target_compile_options(cairn_${name}_testing PRIVATE $<$<CONFIG:Release>:-O1>)
      target_link_libraries(cairn_${name}_testing PUBLIC cairn_${name} GTest::gtest)
      target_compile_definitions(cairn_${name}_testing PRIVATE CAIRN_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
      set(testing_lib cairn_${name}_testing)
    else()
      set(testing_lib "")
    endif()
    if(test_srcs AND CAIRN_BUILD_UNIT_TESTS)
      add_executable(cairn_${name}_test ${test_srcs})
      # Test code at -O1 in Release: the library it tests keeps the build
      # type's -O3. A test file compiles 27% faster (convert_test.cc: 7.4 s
      # against 10.2 s), and 117 of them are built in every Release build.
      target_compile_options(cairn_${name}_test PRIVATE $<$<CONFIG:Release>:-O1>)
      target_compile_definitions(cairn_${name}_test PRIVATE
        CAIRN_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
        CAIRN_TESTDATA_DIR="${PROJECT_SOURCE_DIR}/tests/testdata")
      target_link_libraries(cairn_${name}_test PRIVATE cairn_${name} ${testing_lib}
                            ${ARG_TEST_DEPS} GTest::gtest GTest::gtest_main)
      add_test(NAME ${name} COMMAND cairn_${name}_test)
    endif()
  endif()
endfunction()
