# The Windows part of a Linux build: server-iocp.exe and the unit suites,
# cross-built with mingw-w64 (cmake/toolchains/mingw-w64.cmake) as an
# external project in <build dir>/windows, and tested under Wine:
#   - the Windows unit suites run under Wine (ctest windows:<suite>);
#   - the conformance and robustness suites, Linux programs, run against
#     server-iocp.exe launched through Wine (iocp:<case>), with the other
#     models (tests/CMakeLists.txt, sm_model_suite).
# Wine runs in a prefix of this build's own (<build dir>/wine-prefix), made
# by the fixture test windows:wine-prefix before any of them.
#   SM_WINDOWS=AUTO  (default) when mingw-w64 is found; ON: required; OFF: never
# On a Windows machine none of this applies: the build is native (docs/windows.md).
set(SM_WINDOWS AUTO CACHE STRING "Cross-build and test the Windows model under Wine: AUTO, ON or OFF")
set_property(CACHE SM_WINDOWS PROPERTY STRINGS AUTO ON OFF)
if(NOT CMAKE_SYSTEM_NAME STREQUAL "Linux" OR SM_WINDOWS STREQUAL "OFF")
  return()
endif()

find_program(SM_MINGW_CXX NAMES x86_64-w64-mingw32-g++-posix)
find_program(SM_WINE NAMES wine)
find_program(SM_WINESERVER NAMES wineserver PATHS /usr/lib/wine NO_DEFAULT_PATH)
find_program(SM_WINESERVER NAMES wineserver)
set(_sm_missing "")
if(NOT SM_MINGW_CXX)
  list(APPEND _sm_missing "mingw-w64 (g++-mingw-w64-x86-64)")
endif()
if(SM_BUILD_TESTS AND (NOT SM_WINE OR NOT SM_WINESERVER))
  list(APPEND _sm_missing "Wine (wine, wine64)")
endif()
if(_sm_missing)
  string(REPLACE ";" " and " _sm_missing "${_sm_missing}")
  if(SM_WINDOWS STREQUAL "ON")
    message(FATAL_ERROR "SM_WINDOWS=ON needs ${_sm_missing}: scripts/deps.sh windows installs them")
  endif()
  message(STATUS "Windows model: not built (${_sm_missing} not found; scripts/deps.sh windows)")
  return()
endif()

include(ExternalProject)
set(SM_WINDOWS_BUILD_DIR "${PROJECT_BINARY_DIR}/windows")
ExternalProject_Add(sm_windows
  SOURCE_DIR "${PROJECT_SOURCE_DIR}"
  BINARY_DIR "${SM_WINDOWS_BUILD_DIR}"
  CMAKE_ARGS
    -DCMAKE_TOOLCHAIN_FILE=${PROJECT_SOURCE_DIR}/cmake/toolchains/mingw-w64.cmake
    -DCMAKE_BUILD_TYPE=Release
    -DSM_WERROR=${SM_WERROR}
    -DSM_BUILD_TESTS=${SM_BUILD_TESTS}
  # Its own dependency scan decides what to rebuild: run it every time.
  BUILD_ALWAYS ON
  # The cross-build's configure says what a Windows build lacks ("libuv: not
  # found", "server-epoll: not built (not Linux)"): true there, alarming in
  # the Linux build's output. Into its log (named in one line), shown whole
  # when it fails.
  LOG_CONFIGURE ON
  LOG_OUTPUT_ON_FAILURE ON
  INSTALL_COMMAND ""
  USES_TERMINAL_BUILD ON)

# server-iocp.exe as a target the suites name (sm_model_suite), built by sm_windows.
add_executable(server-iocp IMPORTED GLOBAL)
set_target_properties(server-iocp PROPERTIES
  IMPORTED_LOCATION "${SM_WINDOWS_BUILD_DIR}/servers/iocp/server-iocp.exe"
  SM_BUILT_BY sm_windows)
message(STATUS "Windows model: server-iocp.exe cross-built with ${SM_MINGW_CXX}, tested under ${SM_WINE}")

if(NOT SM_BUILD_TESTS)
  return()
endif()
# What every test run under Wine needs: the prefix, no debug chatter on
# stderr (the suites read the server's log), the command that runs it.
set(SM_WINE_PREFIX "${PROJECT_BINARY_DIR}/wine-prefix")
set(SM_WINE_ENV "WINEPREFIX=${SM_WINE_PREFIX};WINEDEBUG=-all;SM_WINE=${SM_WINE}")
# The suites of model iocp get these (tests/CMakeLists.txt, sm_model_suite).
set(SM_MODEL_iocp_TEST_ENV "${SM_WINE_ENV}")
set(SM_MODEL_iocp_TEST_FIXTURES wine)
