# Finds every dependency with find_package or pkg-config. llhttp is used from an
# installed package when one is found (llhttp CMake config or pkg-config), else
# built from the C sources Debian's node-llhttp ships (or LLHTTP_SOURCE_DIR).
find_package(PkgConfig QUIET)
find_package(Threads REQUIRED)

# --- llhttp -----------------------------------------------------------------
set(LLHTTP_SOURCE_DIR "" CACHE PATH "Directory with llhttp.c, api.c, http.c (default: Debian node-llhttp)")
set(LLHTTP_INCLUDE_DIR "" CACHE PATH "Directory with llhttp.h (default: Debian node-llhttp)")
find_package(llhttp CONFIG QUIET)
if(TARGET llhttp::llhttp_static)
  add_library(sm_llhttp INTERFACE)
  target_link_libraries(sm_llhttp INTERFACE llhttp::llhttp_static)
  message(STATUS "llhttp: installed package ${llhttp_VERSION}")
elseif(TARGET llhttp::llhttp_shared)
  add_library(sm_llhttp INTERFACE)
  target_link_libraries(sm_llhttp INTERFACE llhttp::llhttp_shared)
  message(STATUS "llhttp: installed package ${llhttp_VERSION}")
else()
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(LLHTTP_PC QUIET IMPORTED_TARGET libllhttp)
  endif()
  if(LLHTTP_PC_FOUND)
    add_library(sm_llhttp INTERFACE)
    target_link_libraries(sm_llhttp INTERFACE PkgConfig::LLHTTP_PC)
    message(STATUS "llhttp: pkg-config libllhttp ${LLHTTP_PC_VERSION}")
  else()
    if(NOT LLHTTP_SOURCE_DIR)
      # Sources, not binaries: a cross build takes them from the host too.
      find_path(_sm_llhttp_src NAMES llhttp.c PATHS /usr/share/llhttp /usr/local/share/llhttp
                NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
      if(_sm_llhttp_src)
        set(LLHTTP_SOURCE_DIR "${_sm_llhttp_src}")
      endif()
    endif()
    if(NOT LLHTTP_INCLUDE_DIR)
      find_path(_sm_llhttp_inc NAMES llhttp.h
                PATHS /usr/share/include/llhttp /usr/local/share/include/llhttp /usr/include/llhttp
                NO_CMAKE_FIND_ROOT_PATH)
      if(_sm_llhttp_inc)
        set(LLHTTP_INCLUDE_DIR "${_sm_llhttp_inc}")
      endif()
    endif()
    if(NOT LLHTTP_SOURCE_DIR OR NOT EXISTS "${LLHTTP_SOURCE_DIR}/llhttp.c"
       OR NOT LLHTTP_INCLUDE_DIR OR NOT EXISTS "${LLHTTP_INCLUDE_DIR}/llhttp.h")
      message(FATAL_ERROR "llhttp not found: install Debian's node-llhttp (scripts/deps.sh does), "
                          "or set LLHTTP_SOURCE_DIR and LLHTTP_INCLUDE_DIR")
    endif()
    # Built as distributions ship it: without LLHTTP_STRICT_MODE. The core
    # frames bodies and checks heads itself, the same in either mode (the
    # framing fuzzer runs against both); strict mode costs 1-2.5% of the
    # session's instructions per request and adds no check the framing guard
    # does not already make (docs/internals.md, "The protocol core and its guards").
    # sm_llhttp_strict is the same sources in strict mode, for that fuzzer.
    foreach(lib sm_llhttp sm_llhttp_strict)
      add_library(${lib} STATIC
        ${LLHTTP_SOURCE_DIR}/llhttp.c ${LLHTTP_SOURCE_DIR}/api.c ${LLHTTP_SOURCE_DIR}/http.c)
      target_include_directories(${lib} SYSTEM PUBLIC ${LLHTTP_INCLUDE_DIR})
      set_target_properties(${lib} PROPERTIES C_STANDARD 99 POSITION_INDEPENDENT_CODE ON)
      target_compile_options(${lib} PRIVATE -w)
    endforeach()
    target_compile_definitions(sm_llhttp_strict PRIVATE LLHTTP_STRICT_MODE=1)
    set_target_properties(sm_llhttp_strict PROPERTIES EXCLUDE_FROM_ALL ON)
    message(STATUS "llhttp: built from ${LLHTTP_SOURCE_DIR}")
  endif()
endif()

# --- model-specific libraries: a model whose library is missing is not built ---
# (servers/models.json says which model needs which; cmake/Models.cmake)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(LIBUV QUIET IMPORTED_TARGET libuv>=1.40)
  pkg_check_modules(LIBURING QUIET IMPORTED_TARGET liburing>=2.2)
endif()
if(NOT LIBUV_FOUND)
  find_package(libuv CONFIG QUIET)
endif()
if(LIBUV_FOUND)
  message(STATUS "libuv: ${LIBUV_VERSION}")
elseif(TARGET libuv::uv)
  message(STATUS "libuv: CMake package ${libuv_VERSION}")
else()
  message(STATUS "libuv: not found (Debian: libuv1-dev)")
endif()
if(LIBURING_FOUND)
  message(STATUS "liburing: ${LIBURING_VERSION} (loadgen --engine uring too)")
else()
  message(STATUS "liburing: not found, loadgen has no --engine uring (Debian: liburing-dev)")
endif()

# --- libpq: the database workloads (/db, /queries, /fortunes from PostgreSQL) ---
# common/db (sm_db) is what every Linux model reaches the database with
# (servers/models.json: "database"), so it is required there; pipeline mode
# needs libpq 14 or later (Debian 12: libpq-dev 15). Not on Windows
# (server-iocp has no database client). SM_HAVE_LIBPQ says whether it was found.
set(SM_HAVE_LIBPQ OFF)
if(NOT WIN32)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(LIBPQ QUIET IMPORTED_TARGET libpq>=14)
  endif()
  if(NOT LIBPQ_FOUND)
    message(FATAL_ERROR "libpq 14 or later not found (pkg-config libpq): the Linux models reach "
                        "PostgreSQL with it for the db workloads (Debian: libpq-dev; "
                        "scripts/deps.sh installs it)")
  endif()
  set(SM_HAVE_LIBPQ ON)
  # The models load libpq when --db asks for it (common/db/libpq.cpp), by
  # the soname of the library pkg-config names (libpq.so -> libpq.so.5).
  find_library(_sm_libpq_path NAMES pq HINTS ${LIBPQ_LIBRARY_DIRS} NO_CACHE)
  if(_sm_libpq_path)
    file(REAL_PATH "${_sm_libpq_path}" _sm_libpq_real)
    get_filename_component(_sm_libpq_name "${_sm_libpq_real}" NAME)
    string(REGEX MATCH "^libpq\\.so\\.[0-9]+" _sm_libpq_soname "${_sm_libpq_name}")
  endif()
  set(SM_LIBPQ_SONAME "${_sm_libpq_soname}" CACHE STRING
      "The libpq the models load when --db is given (a soname or a path)")
  if(SM_LIBPQ_SONAME STREQUAL "")
    set(SM_LIBPQ_SONAME "libpq.so.5" CACHE STRING "" FORCE)
  endif()
  message(STATUS "libpq: ${LIBPQ_VERSION} (common/db: the database workloads; loaded as ${SM_LIBPQ_SONAME} with --db)")
  # What the binaries open at run time, which ldd cannot see: docker/rootfs.sh
  # --dlopen puts these (and what they load) into the images.
  file(WRITE "${PROJECT_BINARY_DIR}/dlopen.txt" "${SM_LIBPQ_SONAME}\n")
endif()

# --- header/compiled libraries from Debian -----------------------------------
if(WIN32 AND CMAKE_CROSSCOMPILING)
  # A cross build for Windows (cmake/toolchains/mingw-w64.cmake): the
  # header-only libraries are the host's, used header-only (fmt with
  # FMT_HEADER_ONLY), each through a directory that holds only it, so that
  # the host's C library headers never reach the cross compiler. Nothing
  # compiled for Windows is needed; simdjson serves only the Linux suites.
  set(SM_HOST_INCLUDE_DIR "/usr/include" CACHE PATH
      "Where the host keeps fmt, CLI11, nlohmann/json and Catch2 v2 headers (cross builds)")
  set(_sm_host_headers "${CMAKE_BINARY_DIR}/host-headers")
  file(MAKE_DIRECTORY "${_sm_host_headers}")
  foreach(dir fmt CLI nlohmann catch2)
    if(NOT EXISTS "${SM_HOST_INCLUDE_DIR}/${dir}")
      message(FATAL_ERROR "${SM_HOST_INCLUDE_DIR}/${dir} not found: the Windows cross build uses "
                          "the host's header-only libraries (scripts/deps.sh installs them)")
    endif()
    file(CREATE_LINK "${SM_HOST_INCLUDE_DIR}/${dir}" "${_sm_host_headers}/${dir}" SYMBOLIC)
  endforeach()
  foreach(lib fmt::fmt CLI11::CLI11 nlohmann_json::nlohmann_json Catch2::Catch2)
    add_library(${lib} INTERFACE IMPORTED)
    set_target_properties(${lib} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_sm_host_headers}")
  endforeach()
  set_target_properties(fmt::fmt PROPERTIES INTERFACE_COMPILE_DEFINITIONS FMT_HEADER_ONLY=1)
  # Catch.cmake (catch_discover_tests) from the host's Catch2 package.
  find_path(_sm_catch_cmake Catch.cmake PATHS /usr/lib/cmake/Catch2 /usr/share/cmake/Catch2
            /usr/local/lib/cmake/Catch2 NO_DEFAULT_PATH NO_CMAKE_FIND_ROOT_PATH)
  if(NOT _sm_catch_cmake)
    message(FATAL_ERROR "Catch.cmake (Catch2 v2) not found on the host (Debian: catch2)")
  endif()
  list(APPEND CMAKE_MODULE_PATH "${_sm_catch_cmake}")
  message(STATUS "fmt, CLI11, nlohmann/json, Catch2: header-only from ${SM_HOST_INCLUDE_DIR}")
else()
  find_package(nlohmann_json 3.9 REQUIRED)
  find_package(fmt 8 REQUIRED)
  find_package(CLI11 2 REQUIRED)
  if(NOT WIN32)
    find_package(simdjson REQUIRED)
  endif()
  # Without Catch2 the servers, loadgen and the benches still build (what
  # scripts/start.sh and scripts/compare.sh need, which do not install the
  # test tools); scripts/test.sh sets SM_REQUIRE_TESTS, so a suite is never
  # left out there.
  if(SM_BUILD_TESTS)
    find_package(Catch2 2 QUIET)
    if(NOT Catch2_FOUND)
      if(SM_REQUIRE_TESTS)
        message(FATAL_ERROR "Catch2 2 not found: the test suites need it "
                            "(Debian: catch2; scripts/deps.sh test installs it)")
      endif()
      message(WARNING "Catch2 2 not found: the test suites are not built "
                      "(Debian: catch2; scripts/deps.sh test installs it)")
      set(SM_BUILD_TESTS OFF)
    endif()
  endif()
endif()
