# Thin wrapper over CMake. The two commands the README promises:
#   make demo   install what is missing, build, run the main job
#   make test   install what is missing, build, run every test
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
SYS_PYTHON ?= /usr/bin/python3
CMAKE_FLAGS ?=

# Debian packages the build and the tests need (checked with dpkg, installed
# only when missing).
DEB_PACKAGES := build-essential cmake pkg-config \
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
  libabsl-dev libspdlog-dev libfmt-dev prometheus-cpp-dev libsqlite3-dev sqlite3 \
  libgtest-dev libgmock-dev libbenchmark-dev pybind11-dev python3-dev python3-pytest \
  python3-pip prometheus prometheus-alertmanager clang \
  libcli11-dev nlohmann-json3-dev libcurl4-openssl-dev openssl libprotoc-dev

# ccache, when installed, for the sanitizer builds too.
CCACHE := $(shell command -v ccache 2>/dev/null)
LAUNCHER := $(if $(CCACHE),-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

.PHONY: all deps configure build test demo clean bundle asan tsan

all: build

deps:
	@tools/install_deps.sh $(DEB_PACKAGES)

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DPython_EXECUTABLE=$(SYS_PYTHON) -DPYTHON_EXECUTABLE=$(SYS_PYTHON) $(CMAKE_FLAGS)

configure: deps $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j$(JOBS)

test: build
	tools/run_tests.sh $(BUILD)

demo: build
	tools/demo.sh $(BUILD)

bundle: build
	tools/make_bundle.sh $(BUILD) .bundle

# Unit tests under sanitizers (CMakePresets.json: build-asan/, build-tsan/;
# end-to-end tests, benchmarks and Python are left out there).
asan tsan: deps
	cmake --preset $@ $(LAUNCHER) $(CMAKE_FLAGS)
	cmake --build --preset $@ -j$(JOBS)
	ctest --preset $@ -j$(JOBS)

clean:
	rm -rf $(BUILD) build-asan build-tsan
