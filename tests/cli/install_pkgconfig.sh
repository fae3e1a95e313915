#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# tests/cli/install_pkgconfig.sh: `cmake --install` into a scratch prefix, then the example programs
# built the way docs/mega_moe.md tells users to (cc ... $(pkg-config --cflags --libs megamoe)) against the
# installed shared library, and run. Also: the shared library exports only functions declared in the
# public headers (every exported name starts with mm_ and appears in include/megamoe/), and pkg-config works
# without MPI's development files. (The CMake package: tests/cli/cmake_package.sh.)
# Usage: bash install_pkgconfig.sh <path-to-megamoe> <source-dir>
set -u
source "$(dirname "$0")/lib/common.bash"
BUILD=$(dirname "$MEGAMOE")
PREFIX="$WORK/prefix"

if cmake --install "$BUILD" --prefix "$PREFIX" >"$WORK/install.log" 2>&1; then ok; else bad "cmake --install failed: $(tail -3 "$WORK/install.log")"; fi
lib=$(find "$PREFIX" -name 'libmegamoe.so' | head -1)
pc=$(find "$PREFIX" -name 'megamoe.pc' | head -1)
if [ -n "$lib" ] && [ -n "$pc" ] && [ -x "$PREFIX/bin/megamoe" ] && [ -f "$PREFIX/include/megamoe/mega_moe.h" ]; then ok; else
    bad "install tree incomplete: lib '$lib', pc '$pc'"
fi

# Nothing else is installed: no support library (support/: reference, bench-only code), no private header.
# The Python package (docs/python.md), when built, installs its own .py files and its extension.
(cd "$PREFIX" && find . -type f -o -type l) | sed 's#^\./##' | grep -vE '^bin/megamoe$|^lib[^/]*/(.*/)?libmegamoe\.(a|so[.0-9]*)$' \
    | grep -vE '^lib[^/]*/(.*/)?pkgconfig/megamoe\.pc$' \
    | grep -vE '^lib[^/]*/(.*/)?cmake/megamoe/megamoe(Config|ConfigVersion|Targets|Targets-[a-z]+)\.cmake$' | while read -r f; do
        if [[ $f == include/megamoe/*.h ]] && [ -f "$SOURCE_DIR/$f" ]; then :;
        elif [[ $f =~ ^lib/python3[^/]*/(dist|site)-packages/megamoe/([^/]+)$ ]] &&
            { [ -f "$SOURCE_DIR/python/megamoe/${BASH_REMATCH[2]}" ] || [[ ${BASH_REMATCH[2]} == _megamoe.*.so ]]; }; then :;
        else echo "$f"; fi
    done >"$WORK/extra_installed"
if [ ! -s "$WORK/extra_installed" ]; then ok; else bad "installed beyond the public library, headers, CLI, megamoe.pc and the CMake package: $(tr '\n' ' ' <"$WORK/extra_installed")"; fi

# pkg-config needs nothing but megamoe.pc for --cflags/--libs, even when this build has the MPI backend:
# PKG_CONFIG_LIBDIR replaces the system's search path, as on a machine without libopenmpi-dev (ompi-c.pc).
# A static link does list MPI's libraries (pkg-config --static) when the library has the backend.
if PKG_CONFIG_LIBDIR="$(dirname "$pc")" pkg-config --cflags --libs megamoe >"$WORK/pc_nompi" 2>&1 &&
    grep -q -- "-lmegamoe" "$WORK/pc_nompi"; then ok; else bad "pkg-config megamoe without MPI's .pc: $(cat "$WORK/pc_nompi")"; fi
if "$MEGAMOE" version --features 2>/dev/null | grep -q "mpi backend: yes"; then
    if PKG_CONFIG_LIBDIR="$(dirname "$pc")" pkg-config --static --libs megamoe | grep -q -- "-lmpi"; then ok; else
        bad "pkg-config --static --libs megamoe lacks MPI's library in an MPI build"
    fi
fi

# A sanitizer build's library needs the sanitizer runtime in the program too.
extra=()
if grep -q "^MEGAMOE_SANITIZE:BOOL=ON" "$BUILD/CMakeCache.txt" 2>/dev/null; then extra=(-fsanitize=address,undefined); fi
export ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" # the examples' MPI-free runs still load Open MPI

flags=$(PKG_CONFIG_PATH="$(dirname "$pc")" pkg-config --cflags --libs megamoe) || bad "pkg-config megamoe failed"
for ex in re_routing mega_moe; do
    if cc -std=c17 "${extra[@]}" "$SOURCE_DIR/examples/$ex.c" -o "$WORK/$ex" $flags -lm \
        -Wl,-rpath,"$(dirname "$lib")" 2>"$WORK/cc.log"; then ok; else bad "building $ex: $(head -3 "$WORK/cc.log")"; continue; fi
    if ldd "$WORK/$ex" | grep -q "$(dirname "$lib")/libmegamoe.so"; then ok; else bad "$ex does not use the installed shared library"; fi
    if "$WORK/$ex" >"$WORK/$ex.out" 2>&1; then ok; else bad "$ex failed: $(tail -3 "$WORK/$ex.out")"; fi
done

# Exported names: all mm_*, all declared in a public header.
nm -D --defined-only "$lib" | awk '$2 ~ /^[TW]$/ {print $3}' >"$WORK/exports"
if [ -s "$WORK/exports" ]; then ok; else bad "no exported functions read from $lib"; fi
while read -r name; do
    if grep -rqw -- "$name" "$SOURCE_DIR/include/megamoe/"; then :; else bad "exported '$name' is not in a public header"; fi
done <"$WORK/exports"
ok

cli_finish install_pkgconfig
