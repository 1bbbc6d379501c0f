# promsched developer entry points. `make test` is what CI runs (.ci/run); `make demo` is the sandbox tour.
VENV ?= .venv
PYTHON ?= python3
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)
SANDBOX_DIR ?= .sandbox
DEMO_NODES ?= 6

.PHONY: venv lint format crds install-sandbox install-demo test test-unit test-integration test-load demo demo-down clean

# What the demo needs of pip: promsched (editable) and the sandbox's packages. The test tools come on top.
$(VENV)/.sandbox-installed: pyproject.toml
	@echo "pip: creating $(VENV) and installing promsched (editable) with the sandbox's packages (.[sandbox])"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[sandbox]'
	touch $@

$(VENV)/.installed: $(VENV)/.sandbox-installed
	@echo "pip: installing the test tools (.[test,sandbox])"
	$(BIN)/pip install --quiet -e '.[test,sandbox]'
	touch $@

venv: $(VENV)/.installed

lint: venv
	ruff check operator tests
	ruff format --check operator tests
	mypy
	lint-imports

format: venv
	ruff format operator tests
	ruff check --fix operator tests

crds: venv
	promsched crd > crds/schedulingpolicies.promsched.io.yaml
	cp crds/schedulingpolicies.promsched.io.yaml charts/promsched/crds/

# The image's locks (the Dockerfile installs them with --require-hashes): requirements/runtime.txt from
# pyproject.toml's `dependencies`, requirements/build.txt from its [build-system] requires, resolved for
# the image's Python 3.11 on Linux, wheels only, with every file's hash. Pins already in a lock are kept;
# LOCK_ARGS=--upgrade moves them to the newest releases the ranges allow.
UV_VERSION ?= 0.13.9
LOCK_ARGS ?=
LOCK := UV_CUSTOM_COMPILE_COMMAND="make lock" uv pip compile --quiet --generate-hashes --python-version 3.11 \
	--python-platform linux --only-binary :all: $(LOCK_ARGS)
.PHONY: lock

$(VENV)/.lock-installed: $(VENV)/.installed
	@echo "pip: installing uv $(UV_VERSION), the resolver behind make lock"
	$(BIN)/pip install --quiet uv==$(UV_VERSION)
	touch $@

lock: $(VENV)/.lock-installed
	$(LOCK) pyproject.toml -o requirements/runtime.txt
	python -c "import tomllib; print(*tomllib.load(open('pyproject.toml', 'rb'))['build-system']['requires'], sep='\n')" \
		| $(LOCK) - -o requirements/build.txt

install-sandbox: venv
	promsched sandbox install --with trimaran --with victoriametrics

# The operator's image from the Dockerfile, built by buildah without a Docker daemon into promsched's own
# container storage (~/.cache/promsched/containers), on a Debian base made locally by mmdebstrap.
# Installs buildah, runc and mmdebstrap with apt if missing (root); its last line is the image's
# reference with its digest.
.PHONY: image
image: venv
	promsched sandbox image

# Only what `promsched sandbox up` and the demo run (which `sandbox up` builds itself when missing): no helm,
# kube-scheduler or Trimaran, no test tools.
install-demo: $(VENV)/.sandbox-installed
	promsched sandbox install --only demo

test-unit: venv
	pytest tests/unit -q

test-integration: install-sandbox
	pytest tests/integration -q -m "integration or e2e"

test-load: install-sandbox
	pytest tests/load -q -s

# Everything: lint, types, import layers, then every tier on TEST_WORKERS pytest workers (2, the default: 19-22
# minutes where one took 34 on 2 cores; 0 runs in this process), each running whole test files, in tier order,
# against a sandbox of its own.
TEST_WORKERS ?= 2
test: lint install-sandbox
	pytest tests -q -n $(TEST_WORKERS) --dist loadfile

# `sandbox up` builds what it runs (see install-demo). A second `make demo` reuses the sandbox and the scheduler
# the first one started; `make demo-down` stops them.
demo: $(VENV)/.sandbox-installed
	promsched sandbox up --reuse --dir $(SANDBOX_DIR) --nodes $(DEMO_NODES) --profiles examples/sandbox/demo-profiles.yaml
	promsched demo --dir $(SANDBOX_DIR)

demo-down: $(VENV)/.sandbox-installed
	promsched sandbox down --dir $(SANDBOX_DIR)

clean: demo-down
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache

# Release artifacts, all in dist/ with a SHA256SUMS: the wheel and sdist (twine check), the chart's package
# (helm lint --strict), the image as an OCI archive with its digest (from make image's last line), and the
# krew plugin's archive and manifest (dist/krew/promsched.yaml). RELEASE_URL is where the krew archive will
# be downloaded from (default: the chart's home /releases/download/v<version>).
RELEASE_URL ?=
.PHONY: dist

$(VENV)/.dist-installed: pyproject.toml $(VENV)/.sandbox-installed
	@echo "pip: installing the release tools (.[sandbox,dist]: build, twine)"
	$(BIN)/pip install --quiet -e '.[sandbox,dist]'
	touch $@

dist: $(VENV)/.dist-installed
	rm -rf dist
	python -m build --outdir dist .
	twine check --strict dist/*
	image=$$($(MAKE) --no-print-directory image | tail -n 1) && \
		python -m promsched.sandbox.builds.releasing --out dist --image "$$image" $(if $(RELEASE_URL),--release-url $(RELEASE_URL))

# Every benchmark below has a smoke run in make test's integration tier, at 5 nodes with every variant
# (tests/integration/test_bench_smoke.py; bench/README.md says what each runs).

# Benchmark: promsched vs kube-scheduler vs a null binder on one sandbox per node count; writes bench/results/.
# BENCH_NODES=100,1000,5000 adds the (slow) 5000-node sandbox. Each row runs BENCH_REPEATS times, interleaved,
# and is reported as the median and range; bursts of 5000 (under py-spy) and 10,000 pods measure peak RSS.
BENCH_NODES ?= 100,1000
BENCH_REPEATS ?= 3
BENCH_ARGS ?= --big-burst 5000,10000 --profile --micro
.PHONY: bench

$(VENV)/.bench-installed: pyproject.toml $(VENV)/.installed
	@echo "pip: installing the benchmark's plotting and profiling tools (.[bench]: matplotlib, py-spy)"
	$(BIN)/pip install --quiet -e '.[test,sandbox,bench]'
	touch $@

bench: install-sandbox $(VENV)/.bench-installed
	python -m bench.benchmark --nodes $(BENCH_NODES) --repeats $(BENCH_REPEATS) --out bench/results $(BENCH_ARGS)

# Parked pods (issue 18): 2000 pods that fit nowhere on 100 nodes, promsched then kube-scheduler, parked
# QUIET_PARK_MINUTES each, then room for half; writes bench/results/quiet.{md,json,png}. About 2 x (park + 1.5)
# + 2 minutes of wall time: 25 minutes at the default 10 (24.3 measured on 2 cores).
QUIET_PARK_MINUTES ?= 10
QUIET_ARGS ?=
.PHONY: bench-quiet
bench-quiet: install-sandbox $(VENV)/.bench-installed
	python -m bench.quiet --pods 2000 --park-minutes $(QUIET_PARK_MINUTES) --out bench/results $(QUIET_ARGS)

# Placement quality (issue 15): one seeded trace of services and batch jobs whose pods use what they use,
# replayed on one 100-node sandbox against promsched (examples/fewer-hot-nodes.yaml, estimation on, then off,
# then on p90 over the window), kube-scheduler and Trimaran (TargetLoadPacking, LoadVariationRiskBalancing);
# writes bench/results/quality.{md,json} and quality-*.png. About 6 x (QUALITY_MINUTES + 2) + 3 minutes of
# wall time on 2 cores.
# The scoreboard (issue 40): make bench-quality SEEDS=16,17,18 replays each seed's trace (each seed a
# sandbox of its own, results in bench/results/seed-N/) and then, on the first seed, the outage scenario:
# Prometheus stopped for QUALITY_OUTAGE_MINUTES mid-trace, for promsched, kube-scheduler and both Trimaran
# plugins; writes bench/results/scoreboard.{md,json} (each seed's rows, the medians, the targets) and
# scoreboard-hot-nodes.png. Per seed as above, plus 4 x (QUALITY_MINUTES + 2) minutes for the outage.
QUALITY_MINUTES ?= 10
QUALITY_NODES ?= 100
QUALITY_OUTAGE_MINUTES ?= 3
SEEDS ?=
QUALITY_ARGS ?=
.PHONY: bench-quality
bench-quality: install-sandbox $(VENV)/.bench-installed
	python -m bench.quality --nodes $(QUALITY_NODES) --minutes $(QUALITY_MINUTES) \
		$(if $(SEEDS),--seeds $(SEEDS) --outage-minutes $(QUALITY_OUTAGE_MINUTES)) --out bench/results $(QUALITY_ARGS)

# Rebalancing (issue 20's proof): per seed of REBALANCE_SEEDS, one trace on a 50-node closed-loop sandbox,
# replayed through promsched with spec.rebalance Off, then Enforce; a third of the services drift to 3x
# CPU (at most 800m a pod) at minute REBALANCE_DRIFT_AT; writes bench/results/rebalance-seed-N/
# rebalance.{md,json} and rebalance-hot-nodes.png. About 2 x (REBALANCE_MINUTES + 1.5) + 1 minutes of
# wall time per seed.
REBALANCE_MINUTES ?= 12
REBALANCE_DRIFT_AT ?= 4
REBALANCE_SEEDS ?= 16 17
REBALANCE_ARGS ?=
.PHONY: bench-rebalance
bench-rebalance: install-sandbox $(VENV)/.bench-installed
	for seed in $(REBALANCE_SEEDS); do \
		python -m bench.rebalance_proof --nodes 50 --minutes $(REBALANCE_MINUTES) --drift-at $(REBALANCE_DRIFT_AT) \
			--seed $$seed --out bench/results/rebalance-seed-$$seed $(REBALANCE_ARGS) || exit 1; \
	done
