# SPDX-License-Identifier: Apache-2.0
# Thin wrapper around CMake/CTest so the everyday commands are short.
#   make            configure + build (build/, Release; the CLI lands at build/megamoe)
#   make test       build, then run every test (unit, CLI, MPI through mpirun)
#   make run        build, then run `megamoe run` on its built-in default
#   make sanitize   build with AddressSanitizer + UndefinedBehaviorSanitizer in build-asan/ and run the tests
#   make format     reformat the C sources; make format-check fails on any difference
#   make install    cmake --install (PREFIX=/usr/local by default)
BUILD ?= build
ASAN_BUILD ?= build-asan
PREFIX ?= /usr/local
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CTEST_FLAGS ?= --output-on-failure

.PHONY: all build test run sanitize format format-check install clean

all: build

build:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=$(PREFIX)
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest -j $(JOBS) $(CTEST_FLAGS)

run: build
	./$(BUILD)/megamoe run

sanitize:
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DMEGAMOE_SANITIZE=ON
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && ctest -j $(JOBS) $(CTEST_FLAGS)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

format-check:
	bash scripts/check-format.sh

install: build
	cmake --install $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
