# The installed package: `cmake --install <build> --prefix <prefix>` puts
#   <prefix>/lib/libcairn.so             every layer in one shared library;
#                                        its dependencies (zstd, curl, MPI ...)
#                                        are linked privately, so a program
#                                        needs none of their headers;
#   <prefix>/include/cairn/*.h           the public API (include/cairn/), which
#                                        includes nothing but itself and the
#                                        standard library;
#   <prefix>/lib/cmake/cairn/            cairnConfig.cmake: the target cairn::cairn.
# A C++ program then builds with
#   find_package(cairn REQUIRED)
#   target_link_libraries(app PRIVATE cairn::cairn)
# (examples/installed/ does, and the ctest `installed_package` builds and runs
# it against a fresh install.)
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The layers that implement include/cairn/, whole: a public function nothing
# inside the library calls must still be in it.
set(CAIRN_PUBLIC_LAYERS cairn_api cairn_dist)

add_library(cairn SHARED ${PROJECT_SOURCE_DIR}/cmake/cairn_library.cc)
target_link_libraries(cairn PRIVATE "$<LINK_LIBRARY:WHOLE_ARCHIVE,${CAIRN_PUBLIC_LAYERS}>")
target_include_directories(cairn INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                                           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
target_compile_features(cairn INTERFACE cxx_std_20)
set_target_properties(cairn PROPERTIES VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})

install(TARGETS cairn EXPORT cairnTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/cairn DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(EXPORT cairnTargets NAMESPACE cairn:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/cairn)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/cairnConfig.cmake.in
                              ${CMAKE_CURRENT_BINARY_DIR}/cairnConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/cairn)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/cairnConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/cairnConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/cairnConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/cairn)

# The test: install into the build tree, build examples/installed/ against
# that install alone (no source tree on its include path), run it.
if(CAIRN_BUILD_TESTS)
  add_test(NAME installed_package
           COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                   -DGENERATOR=${CMAKE_GENERATOR} -DCOMPILER=${CMAKE_CXX_COMPILER}
                   -P ${PROJECT_SOURCE_DIR}/cmake/test_installed_package.cmake)
  set_tests_properties(installed_package PROPERTIES TIMEOUT 600)
endif()
