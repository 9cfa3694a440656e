# Install and package wizq: `cmake --install`, `make install`, the CMake
# package wizq::wizq, wizq.pc, and the packaging tests. docs/INSTALL.md is
# the user's side of this file.
#
# The library's sources are compiled once, position-independent, by the
# in-tree static library `wizq` (what the binary, the tests and the
# benchmarks link, as before). Its object files are then linked again,
# without compiling anything, into
#   wizq_shared  build/libwizq.so.X.Y.Z (SONAME libwizq.so.${WIZQ_SOVERSION})
#   wizq_static  build/static/libwizq.a (the installed archive)
# Both carry a clean link interface: the public headers (include/) and, for
# the archive, its private dependencies as link-only items. The in-tree
# `wizq` keeps its wider interface (nlohmann, valijson, the source tree)
# that in-tree code needs and outside code must not get.

include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# include/wizq/version.h is checked in (the header-alone tests and the
# other public headers see it without a configure step); it must say what
# project(wizq VERSION ...) says.
file(STRINGS ${CMAKE_SOURCE_DIR}/include/wizq/version.h _wizq_version_lines
     REGEX "^#define WIZQ_VERSION_(MAJOR|MINOR|PATCH) ")
set(_wizq_header_version "")
foreach(part MAJOR MINOR PATCH)
  set(_wizq_part "?")
  foreach(line IN LISTS _wizq_version_lines)
    if(line MATCHES "^#define WIZQ_VERSION_${part} +([0-9]+)")
      set(_wizq_part ${CMAKE_MATCH_1})
    endif()
  endforeach()
  list(APPEND _wizq_header_version ${_wizq_part})
endforeach()
list(JOIN _wizq_header_version "." _wizq_header_version)
if(NOT _wizq_header_version STREQUAL wizq_VERSION)
  message(FATAL_ERROR "include/wizq/version.h says ${_wizq_header_version} "
    "(WIZQ_VERSION_MAJOR/MINOR/PATCH) but CMakeLists.txt says "
    "project(wizq VERSION ${wizq_VERSION}): make them agree")
endif()
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS
             ${CMAKE_SOURCE_DIR}/include/wizq/version.h)

# The ABI number: the SONAME is libwizq.so.${WIZQ_SOVERSION}. Bumped on
# every release that breaks the ABI, independently of the project version
# (docs/INSTALL.md, "Versioning").
set(WIZQ_SOVERSION 0)

# What the library itself links (not the header-only nlohmann and valijson,
# which no public header uses). Keep in step with target_link_libraries(wizq
# ...) in CMakeLists.txt and Requires.private in cmake/wizq.pc.in.
set(WIZQ_LINK_DEPS simdjson::simdjson ZLIB::ZLIB PkgConfig::XXHASH
    Threads::Threads)

set_target_properties(wizq PROPERTIES POSITION_INDEPENDENT_CODE ON)

add_library(wizq_shared SHARED $<TARGET_OBJECTS:wizq>)
set_target_properties(wizq_shared PROPERTIES OUTPUT_NAME wizq
  VERSION ${wizq_VERSION} SOVERSION ${WIZQ_SOVERSION})
target_link_libraries(wizq_shared PRIVATE ${WIZQ_LINK_DEPS})
if(NOT WIZQ_SANITIZE)
  # Every symbol the objects use is defined in them or in WIZQ_LINK_DEPS.
  target_link_options(wizq_shared PRIVATE LINKER:--no-undefined)
endif()

add_library(wizq_static STATIC $<TARGET_OBJECTS:wizq>)
set_target_properties(wizq_static PROPERTIES OUTPUT_NAME wizq
  ARCHIVE_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/static)
target_link_libraries(wizq_static PRIVATE ${WIZQ_LINK_DEPS})

foreach(t wizq_shared wizq_static)
  target_include_directories(${t} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  target_compile_features(${t} INTERFACE cxx_std_17)
endforeach()

# --- what `cmake --install` installs ----------------------------------------
# GNUInstallDirs: lib/ under any prefix but /usr, where Debian's multiarch
# lib/x86_64-linux-gnu/ is used; the CMake package and wizq.pc go under the
# same libdir, where find_package and pkg-config look for them.
file(GLOB WIZQ_PUBLIC_HEADERS CONFIGURE_DEPENDS
     ${CMAKE_SOURCE_DIR}/include/wizq/*.h)
set(WIZQ_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/wizq)

install(TARGETS wizq_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS wizq_shared EXPORT wizqTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(TARGETS wizq_static EXPORT wizqStaticTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${WIZQ_PUBLIC_HEADERS}
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/wizq)
install(EXPORT wizqTargets NAMESPACE wizq:: DESTINATION ${WIZQ_CMAKE_DIR})
install(EXPORT wizqStaticTargets NAMESPACE wizq::
  DESTINATION ${WIZQ_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/wizqConfig.cmake.in
  ${CMAKE_BINARY_DIR}/packaging/wizqConfig.cmake
  INSTALL_DESTINATION ${WIZQ_CMAKE_DIR})
# 0.x: a new minor version may break the API, so 0.1 accepts 0.1.z only.
write_basic_package_version_file(
  ${CMAKE_BINARY_DIR}/packaging/wizqConfigVersion.cmake
  VERSION ${wizq_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/packaging/wizqConfig.cmake
  ${CMAKE_BINARY_DIR}/packaging/wizqConfigVersion.cmake
  DESTINATION ${WIZQ_CMAKE_DIR})

# wizq.pc finds its prefix relative to its own directory (${pcfiledir}), so
# `cmake --install --prefix P` and DESTDIR staging need no reconfigure.
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(WIZQ_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
else()
  file(RELATIVE_PATH _wizq_up "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
  string(REGEX REPLACE "/$" "" _wizq_up "${_wizq_up}")
  set(WIZQ_PC_PREFIX "\${pcfiledir}/${_wizq_up}")
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/wizq.pc.in
  ${CMAKE_BINARY_DIR}/packaging/wizq.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/packaging/wizq.pc
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# --- packaging tests (tests/packaging/README.md) -----------------------------
# The fixture installs this build into build/packaging-test/prefix (a copy;
# nothing is compiled); the others build outside projects against it. Not in
# sanitizer builds, whose library needs the sanitizer runtime at link time.
if(NOT WIZQ_SANITIZE)
  set(_wizq_pt ${CMAKE_BINARY_DIR}/packaging-test)
  set(_wizq_prefix ${_wizq_pt}/prefix)
  set(_wizq_env "WIZQ_CMAKE=${CMAKE_COMMAND}" "CXX=${CMAKE_CXX_COMPILER}")
  add_test(NAME packaging_install COMMAND sh
    ${CMAKE_SOURCE_DIR}/tests/packaging/install.sh ${CMAKE_BINARY_DIR}
    ${_wizq_prefix} ${CMAKE_INSTALL_LIBDIR} ${wizq_VERSION} ${WIZQ_SOVERSION}
    ${WIZQ_PUBLIC_HEADERS})
  set_tests_properties(packaging_install PROPERTIES
    FIXTURES_SETUP wizq_installed ENVIRONMENT "${_wizq_env}")

  # One translation unit per public header, included twice (the include
  # guard), compiled with nothing but the installed include directory.
  set(_wizq_tus "")
  foreach(h IN LISTS WIZQ_PUBLIC_HEADERS)
    get_filename_component(_name ${h} NAME)
    get_filename_component(_we ${h} NAME_WE)
    file(CONFIGURE OUTPUT ${_wizq_pt}/headers/${_we}_alone.cc
      CONTENT "#include \"wizq/${_name}\"\n#include \"wizq/${_name}\"\n")
    list(APPEND _wizq_tus ${_wizq_pt}/headers/${_we}_alone.cc)
  endforeach()
  add_test(NAME packaging_headers_alone COMMAND sh
    ${CMAKE_SOURCE_DIR}/tests/packaging/headers.sh alone ${_wizq_prefix}
    ${_wizq_tus})
  add_test(NAME packaging_headers_private COMMAND sh
    ${CMAKE_SOURCE_DIR}/tests/packaging/headers.sh private ${_wizq_prefix}
    ${_wizq_tus})
  add_test(NAME packaging_headers_names COMMAND sh
    ${CMAKE_SOURCE_DIR}/tests/packaging/headers.sh names ${_wizq_prefix}
    ${_wizq_tus})

  # tests/packaging/consumer with find_package (wizq::wizq shared, and
  # static with wizq_USE_STATIC_LIBS) and with pkg-config (shared, --static);
  # examples/embed with find_package and pkg-config (skipped, exit 77, until
  # that directory exists; --mirror because a pkg-config build does not get
  # the mirror's path its CMakeLists.txt compiles in).
  set(_wizq_run ${CMAKE_SOURCE_DIR}/tests/packaging/outside_build.sh)
  set(_wizq_outside "")
  foreach(mode cmake cmake-static pc pc-static)
    add_test(NAME packaging_consumer_${mode} COMMAND sh ${_wizq_run} ${mode}
      ${_wizq_prefix} ${CMAKE_SOURCE_DIR}/tests/packaging/consumer
      ${_wizq_pt}/consumer-${mode} -- wizq-consumer --dir
      ${_wizq_pt}/consumer-${mode}/run)
    list(APPEND _wizq_outside packaging_consumer_${mode})
  endforeach()
  foreach(mode cmake pc)
    add_test(NAME packaging_example_${mode} COMMAND sh ${_wizq_run} ${mode}
      ${_wizq_prefix} ${CMAKE_SOURCE_DIR}/examples/embed
      ${_wizq_pt}/example-${mode} -- embed-wizard --dir
      ${_wizq_pt}/example-${mode}/run
      --mirror ${CMAKE_SOURCE_DIR}/examples/installer/mirror)
    list(APPEND _wizq_outside packaging_example_${mode})
  endforeach()
  set_tests_properties(${_wizq_outside} PROPERTIES SKIP_RETURN_CODE 77
    TIMEOUT 300)
  set_tests_properties(packaging_headers_alone packaging_headers_private
    packaging_headers_names ${_wizq_outside} PROPERTIES FIXTURES_REQUIRED
    wizq_installed
    ENVIRONMENT "${_wizq_env}")
endif()
