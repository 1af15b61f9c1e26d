# Cross build for 64-bit Windows from Linux with mingw-w64 (Debian:
# g++-mingw-w64-x86-64, its posix-threads variant: std::thread and
# std::mutex need it). Used by the `windows` preset and by the Linux builds'
# Windows part (SM_WINDOWS, cmake/Windows.cmake):
#   cmake --preset windows && cmake --build --preset windows
# The executables run under Wine here: CMAKE_CROSSCOMPILING_EMULATOR makes
# ctest (and Catch2's test discovery) run them through it.
set(CMAKE_SYSTEM_NAME Windows)
set(CMAKE_SYSTEM_PROCESSOR x86_64)

set(SM_MINGW_PREFIX x86_64-w64-mingw32 CACHE STRING "mingw-w64 tool prefix")
find_program(CMAKE_C_COMPILER NAMES ${SM_MINGW_PREFIX}-gcc-posix ${SM_MINGW_PREFIX}-gcc)
find_program(CMAKE_CXX_COMPILER NAMES ${SM_MINGW_PREFIX}-g++-posix ${SM_MINGW_PREFIX}-g++)
find_program(CMAKE_RC_COMPILER NAMES ${SM_MINGW_PREFIX}-windres windres)
if(NOT CMAKE_CXX_COMPILER)
  message(FATAL_ERROR "mingw-w64 not found (Debian: g++-mingw-w64-x86-64; scripts/deps.sh windows installs it)")
endif()

# Libraries and headers come from the mingw sysroot only; the header-only
# dependencies shared with the Linux build are taken from the host's
# include directory one by one (cmake/Dependencies.cmake), never the whole
# of /usr/include, whose C library headers are Linux ones.
set(CMAKE_FIND_ROOT_PATH /usr/${SM_MINGW_PREFIX})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)

# The C++ runtime is linked statically: the .exe needs no mingw DLLs beside it.
set(CMAKE_EXE_LINKER_FLAGS_INIT "-static")

find_program(SM_WINE NAMES wine wine64)
if(SM_WINE)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${SM_WINE})
endif()

# pkg-config sees the sysroot's packages only, never the host's (libuv,
# liburing there are Linux libraries).
set(ENV{PKG_CONFIG_LIBDIR} "${CMAKE_FIND_ROOT_PATH}/lib/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
