# System dependencies, all from Debian packages (scripts/install-deps.sh).
find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(ZLIB REQUIRED)
# The object-store drivers (kvstore/http, s3): libcurl and OpenSSL (SigV4).
find_package(CURL REQUIRED)
find_package(OpenSSL REQUIRED)

find_path(ZSTD_INCLUDE_DIR zstd.h REQUIRED)
find_library(ZSTD_LIBRARY NAMES zstd REQUIRED)
add_library(zstd::zstd UNKNOWN IMPORTED)
set_target_properties(zstd::zstd PROPERTIES IMPORTED_LOCATION ${ZSTD_LIBRARY}
                      INTERFACE_INCLUDE_DIRECTORIES ${ZSTD_INCLUDE_DIR})

find_path(BLOSC_INCLUDE_DIR blosc.h REQUIRED)
find_library(BLOSC_LIBRARY NAMES blosc REQUIRED)
add_library(Blosc::blosc UNKNOWN IMPORTED)
set_target_properties(Blosc::blosc PROPERTIES IMPORTED_LOCATION ${BLOSC_LIBRARY}
                      INTERFACE_INCLUDE_DIRECTORIES ${BLOSC_INCLUDE_DIR})

find_path(ISAL_INCLUDE_DIR isa-l/crc.h REQUIRED)
find_library(ISAL_LIBRARY NAMES isal REQUIRED)
add_library(ISAL::isal UNKNOWN IMPORTED)
set_target_properties(ISAL::isal PROPERTIES IMPORTED_LOCATION ${ISAL_LIBRARY}
                      INTERFACE_INCLUDE_DIRECTORIES ${ISAL_INCLUDE_DIR})

if(CAIRN_BUILD_TESTS)
  find_package(GTest REQUIRED)
endif()
