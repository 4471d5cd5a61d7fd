# Thin wrapper over CMake. The two commands the README promises:
#   make demo   install what is missing, build (quietly), run the demo job
#   make test   install what is missing, build, run every test
# Deployment (docs/deploy.md):
#   make install [PREFIX=/usr/local] [DESTDIR=]  binaries, hook, plugin, Python
#               files, systemd units, dashboards, Prometheus/Alertmanager files
#   make images         engine, node and demo images (buildah, podman or docker)
#   make stack          engine + Prometheus + Alertmanager + Grafana (compose)
#   make stack-replicas the same with two engine replicas on PostgreSQL
#   make deploy-check   the deployment kit's checks (part of make test)
#   make fuzz [FUZZ_SECONDS=600]  every libFuzzer target (clang) for that long each
#   make fuzz-bundle [FUZZ_BUNDLE=build-fuzz/fuzz-bundle.tar.xz]  the built fuzzers
#               and corpora, to run elsewhere with tools/run_fuzz_bundle.sh
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
  yamllint python3-venv python3-yaml patchelf docker-compose \
  libcli11-dev nlohmann-json3-dev libcurl4-openssl-dev openssl libprotoc-dev \
  libpq-dev postgresql-15 libjemalloc-dev
# Only for `make images` and `make stack` (image builder, compose, a Debian
# base made from Debian's packages where no registry is reachable; the CNI
# dnsname plugin resolves compose service names under podman).
IMAGE_DEB_PACKAGES := buildah podman podman-compose runc mmdebstrap uidmap \
  golang-github-containernetworking-plugin-dnsname

PREFIX ?= /usr/local
DESTDIR ?=
STRIP ?= 0

.PHONY: all deps configure build test demo clean bundle wheel catalogue install install-only install-demo \
  images image-deps stack stack-replicas stack-down deploy-check deploy-tools asan tsan fuzz fuzz-bundle scale \
  scale-100k

# ccache, when installed, for the sanitizer builds too.
CCACHE := $(shell command -v ccache 2>/dev/null)
LAUNCHER := $(if $(CCACHE),-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)

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

# Quietly: one progress line, the build log only on failure.
demo:
	@tools/quiet_build.sh $(BUILD) $(MAKE) --no-print-directory build BUILD=$(BUILD) JOBS=$(JOBS)
	@tools/demo.sh $(BUILD)

bundle: build
	tools/make_bundle.sh $(BUILD) .bundle

# The pip wheel (hook, plugin, daemon, CLI in the xputimer package) in .whl-xpu/.
wheel: build
	tools/make_wheel.sh $(BUILD) .whl-xpu

# The fault catalogue on the GPU-less runtime (a few minutes): scores every
# emulated fault class and writes the table into docs/diagnosis-catalogue.md
# (tests/gpu/run_catalogue.sh --help; on GPUs the same script with a bundle).
catalogue: build
	DOC=docs/diagnosis-catalogue.md OUT=$(BUILD)/catalogue tests/gpu/run_catalogue.sh --fake $(BUILD)/tests/e2e_hang/e2e_paths.json

# `install` builds first; `install-only` installs an existing build (the image
# build runs it after compiling the target xpu_installed only).
install: build
	$(MAKE) --no-print-directory install-only

install-only:
	@test -f $(BUILD)/CMakeCache.txt || { echo "install: no build in $(BUILD) (run make build)" >&2; exit 2; }
	DESTDIR="$(DESTDIR)" cmake --install $(BUILD) --prefix "$(PREFIX)" $(if $(filter 1,$(STRIP)),--strip,)

# The GPU-less test runtime and the demo scripts on top of an installed tree
# (the demo image only; never part of a production install).
install-demo:
	docker/demo/install-demo.sh $(BUILD) "$(DESTDIR)$(PREFIX)"

image-deps:
	@tools/install_deps.sh $(IMAGE_DEB_PACKAGES)

# Builds the images (docker/build-images.sh --help: builder, bases, tags).
images: image-deps
	docker/build-images.sh

stack: image-deps
	docker/stack.sh up

stack-replicas: image-deps
	docker/stack.sh up --replicas

stack-down:
	docker/stack.sh down

# The kit's checks: units, Prometheus/Alertmanager files, Dockerfile steps,
# compose file, Kubernetes manifests, Grafana provisioning, install + demo job.
deploy-check: build
	cd $(BUILD) && ctest -L deploy --output-on-failure

# Python validators for the Kubernetes manifests (kubernetes-validate carries
# the Kubernetes OpenAPI schemas), in a venv of the build directory; the
# ctest fixture deploy_tools runs this too.
deploy-tools:
	tests/deploy/setup_tools.sh $(BUILD)/deploy-venv

# Unit tests under sanitizers (CMakePresets.json: build-asan/, build-tsan/;
# end-to-end tests, benchmarks and Python are left out there).
asan tsan: deps
	cmake --preset $@ $(LAUNCHER) $(CMAKE_FLAGS)
	cmake --build --preset $@ -j$(JOBS)
	ctest --preset $@ -j$(JOBS)

# Every fuzz target of untrusted input (ring readers of the daemon and of the
# Python module, the engine's batch decoder) under libFuzzer with ASan/UBSan,
# FUZZ_SECONDS each, in parallel on $(JOBS) cores (build-fuzz/, corpora kept
# in build-fuzz/corpus/, logs and summary in build-fuzz/fuzz-out/). The fast
# form of each runs in make test (ctest -L fuzz and *_fuzz_unittest).
# fuzz-bundle packs what `make fuzz` built (fuzzers, corpora, their shared
# libraries) for tools/run_fuzz_bundle.sh BUNDLE SECONDS OUTDIR [CORES].
FUZZ_SECONDS ?= 600
FUZZ_BUNDLE ?= build-fuzz/fuzz-bundle.tar.xz
fuzz: deps
	tools/run_fuzz.sh build-fuzz $(FUZZ_SECONDS) $(JOBS)
fuzz-bundle: deps
	tools/run_fuzz.sh build-fuzz 1 $(JOBS) build-fuzz/fuzz-out-bundle
	tools/make_fuzz_bundle.sh build-fuzz $(FUZZ_BUNDLE)

# The engine at scale (docs/scale.md): xpu-sim at 1k and 10k ranks (healthy,
# a slow GPU, a rank stuck in Python), the localization at a million ranks and
# each slowdown detector's cost per rank at 1k, 10k and 100k ranks;
# scale-100k is the 100k-rank run (about 10 GB of memory, 4+ free cores). Each
# writes its table into docs/scale.md; the 256-rank form runs in make test.
SCALE_OUT ?= $(BUILD)/scale
scale: build
	bench/scale/run_scale.py --sim $(BUILD)/tools/sim/xpu-sim --ranks 1000,10000 \
	  --out $(SCALE_OUT) --docs docs/scale.md --section 1k-10k
	$(BUILD)/bench/localize/localize_bench --workers 1000000
	$(BUILD)/bench/detectors/detector_scale_bench --ranks 1000,10000,100000 --windows 3 \
	  --fault slow_gpu:370:1

scale-100k: build
	bench/scale/run_scale.py --sim $(BUILD)/tools/sim/xpu-sim --ranks 100000 --window-s 30 \
	  --windows 4 \
	  --out $(SCALE_OUT)-100k --docs docs/scale.md --section 100k

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz
