#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/cmake_package.sh: the two ways a CMake project takes megamoe (docs/building.md). A scratch
# project builds examples/re_routing.c and runs it (1) against the package installed into a scratch
# prefix, found with find_package(megamoe CONFIG), with megamoe::megamoe (shared) and
# megamoe::megamoe_static, and (2) with add_subdirectory(<source-dir>), where only the library may be
# built (no CLI, tests, support library or examples) and megamoe's -Werror must not be used.
# Usage: bash cmake_package.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash"
BUILD=$(dirname "$MEGAMOE")
PREFIX="$WORK/prefix"
[ -n "$SOURCE_DIR" ] || { bad "no source dir given"; cli_finish cmake_package; }
if grep -qE "^MEGAMOE_(SANITIZE|FUZZ|TSAN):BOOL=ON" "$BUILD/CMakeCache.txt" 2>/dev/null; then
    # The sanitizer runtimes would have to be linked into the scratch programs too; install_pkgconfig.sh
    # covers the installed tree in those builds.
    echo "cmake_package: sanitizer build, the scratch projects are checked in the plain build only"
    ok
    cli_finish cmake_package
fi
export ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"

if cmake --install "$BUILD" --prefix "$PREFIX" >"$WORK/install.log" 2>&1; then ok; else bad "cmake --install failed: $(tail -3 "$WORK/install.log")"; fi
config=$(find "$PREFIX" -name megamoeConfig.cmake | head -1)
if [ -n "$config" ] && [ -f "$(dirname "$config")/megamoeConfigVersion.cmake" ]; then ok; else bad "no megamoeConfig.cmake + version file under $PREFIX"; fi

# (1) find_package: the version file accepts this version and refuses another minor one.
mkdir -p "$WORK/consumer"
cp "$SOURCE_DIR/examples/re_routing.c" "$WORK/consumer/main.c"
cat >"$WORK/consumer/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.18)
project(consumer LANGUAGES C)
find_package(megamoe ${WANT_VERSION} CONFIG REQUIRED)
add_executable(consumer_shared main.c)
target_link_libraries(consumer_shared PRIVATE megamoe::megamoe)
add_executable(consumer_static main.c)
target_link_libraries(consumer_static PRIVATE megamoe::megamoe_static)
file(WRITE ${CMAKE_BINARY_DIR}/found.txt "${megamoe_VERSION} ${megamoe_WITH_MPI}\n")
CMAKE
version=$("$MEGAMOE" version | awk '{print $2}')
if cmake -S "$WORK/consumer" -B "$WORK/consumer/build" -DCMAKE_PREFIX_PATH="$PREFIX" -DWANT_VERSION="$version" \
    >"$WORK/cfg.log" 2>&1 && cmake --build "$WORK/consumer/build" >"$WORK/build.log" 2>&1; then ok; else
    bad "find_package consumer: $(tail -5 "$WORK/cfg.log" "$WORK/build.log" 2>/dev/null)"
fi
if grep -q "^$version " "$WORK/consumer/build/found.txt" 2>/dev/null; then ok; else bad "megamoe_VERSION is not $version"; fi
for exe in consumer_shared consumer_static; do
    if "$WORK/consumer/build/$exe" >"$WORK/$exe.out" 2>&1; then ok; else bad "$exe failed: $(tail -3 "$WORK/$exe.out")"; fi
done
if ldd "$WORK/consumer/build/consumer_shared" 2>/dev/null | grep -q "$PREFIX/.*libmegamoe.so"; then ok; else bad "megamoe::megamoe is not the installed shared library"; fi
if ldd "$WORK/consumer/build/consumer_static" 2>/dev/null | grep -q "libmegamoe.so"; then bad "megamoe::megamoe_static links the shared library"; else ok; fi
major=${version%%.*}
rest=${version#*.}
minor=${rest%%.*}
if cmake -S "$WORK/consumer" -B "$WORK/consumer/build_other" -DCMAKE_PREFIX_PATH="$PREFIX" \
    -DWANT_VERSION="$major.$((minor + 1))" >"$WORK/cfg_other.log" 2>&1; then bad "find_package accepted version $major.$((minor + 1))"; else ok; fi

# (2) add_subdirectory: a parent with its own warnings; only libmegamoe's targets are generated.
# add_subdirectory configures the source tree with its own defaults, whatever this build's options: the
# same check in every build, so a build without MPI (CI's second package pass) stops here, after the
# installed package of its own configuration was found and linked (~35 s less).
if grep -qE "^MEGAMOE_WITH_MPI:BOOL=OFF" "$BUILD/CMakeCache.txt" 2>/dev/null; then
    echo "cmake_package: build without MPI, the add_subdirectory checks run in the default build only"
    cli_finish cmake_package
fi
mkdir -p "$WORK/parent"
cp "$SOURCE_DIR/examples/re_routing.c" "$WORK/parent/main.c"
cat >"$WORK/parent/CMakeLists.txt" <<CMAKE
cmake_minimum_required(VERSION 3.18)
project(parent LANGUAGES C)
add_subdirectory("$SOURCE_DIR" megamoe)
add_executable(parent_app main.c)
target_link_libraries(parent_app PRIVATE megamoe::megamoe)
CMAKE
# Build type "Plain" (no flags: -O0 without -g) compiles the library fastest; megamoe must keep it.
if cmake -S "$WORK/parent" -B "$WORK/parent/build" -DCMAKE_BUILD_TYPE=Plain \
    >"$WORK/pcfg.log" 2>&1; then ok; else bad "add_subdirectory configure: $(tail -5 "$WORK/pcfg.log")"; fi
cmake --build "$WORK/parent/build" --target help >"$WORK/targets" 2>&1
for unwanted in megamoe_cli megamoe_support test_json example_re_routing; do
    if grep -qw "$unwanted" "$WORK/targets"; then bad "add_subdirectory generates '$unwanted'"; else ok; fi
done
if grep -q "^CMAKE_BUILD_TYPE:STRING=Plain" "$WORK/parent/build/CMakeCache.txt"; then ok; else bad "megamoe changed the parent's build type"; fi
if cmake --build "$WORK/parent/build" --parallel 2 --target parent_app -- VERBOSE=1 >"$WORK/pbuild.log" 2>&1; then ok; else
    bad "add_subdirectory build: $(grep -m3 -E 'error|Error' "$WORK/pbuild.log")"
fi
if grep -q -- "-Werror" "$WORK/pbuild.log"; then bad "add_subdirectory build uses -Werror"; else ok; fi
if grep -q -- "-Wall" "$WORK/pbuild.log"; then ok; else bad "megamoe's own warnings are gone in a subproject build (compile lines not seen?)"; fi
if "$WORK/parent/build/parent_app" >"$WORK/parent.out" 2>&1; then ok; else bad "parent_app failed: $(tail -3 "$WORK/parent.out")"; fi

cli_finish cmake_package
