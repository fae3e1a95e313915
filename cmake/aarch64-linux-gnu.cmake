# SPDX-License-Identifier: Apache-2.0
# cmake/aarch64-linux-gnu.cmake: toolchain file for a cross build to 64-bit Arm Linux with Debian's
# gcc-aarch64-linux-gnu (docs/building.md, 'Other CPUs'). The tests then run under qemu-user:
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DMEGAMOE_WITH_MPI=OFF
# CMAKE_CROSSCOMPILING_EMULATOR makes ctest start each test executable through qemu-aarch64 with the
# aarch64 C library of the cross toolchain (/usr/aarch64-linux-gnu).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
