# gpu-ops: the two commands of the README and the pieces they are made of.
#   make demo   set up everything, start the local lab, run the demo, stop the lab
#   make test   set up everything, run every test and linter (what .ci/run runs)
SHELL := /bin/bash
VENV  ?= .venv
PY    := $(VENV)/bin/python
export GPUOPS_CACHE ?= $(HOME)/.cache/gpuops

.PHONY: bench-headroom bench-headroom-curve bench-image demo test setup lint lint-python lint-ansible lint-groovy test-python test-groovy wheelhouse release lab-up lab-down

demo: setup
	scripts/demo.sh

test: setup
	scripts/test.sh

setup:
	scripts/setup.sh

lint: lint-python lint-groovy lint-ansible

lint-python:
	$(VENV)/bin/ruff check --config python/pyproject.toml python/src lab/src lab/tests tests/python bench scripts/step-docs.py ansible
	$(VENV)/bin/ruff format --check --config python/pyproject.toml python/src lab/src lab/tests tests/python bench scripts/step-docs.py ansible
	cd python && ../$(VENV)/bin/mypy

lint-ansible:
	cd ansible && ANSIBLE_ROLES_PATH=roles ../$(VENV)/bin/ansible-lint --offline --profile production .

lint-groovy:
	scripts/groovy-lint.sh

# PYTEST_ARGS: paths or options (scripts/test.sh runs the unit tests, then the lab's)
test-python:
	$(VENV)/bin/pytest $(PYTEST_ARGS)

test-groovy:
	gradle --console=plain test

wheelhouse:
	scripts/wheelhouse.sh wheelhouse

# A release of the version in resources/org/gpuops/VERSION: dist/<version>/ (wheelhouse with
# hashes, agent image as an OCI archive, SHA256SUMS) and the git tag v<version>. Needs buildah
# and a clean tree (make setup first). BASE_IMAGE=<your Jenkins inbound-agent image with python3>,
# or LAB_BASE=1 for the lab's stand-in base (tests only). See docs/JENKINS-INSTALL.md.
release:
	PYTHON=$(PY) scripts/release.sh $(if $(LAB_BASE),--lab-base)

lab-up:
	$(VENV)/bin/gpuops lab up

lab-down:
	$(VENV)/bin/gpuops lab down

# Benchmarks print ratios against baselines measured in the same run; they are not tests.
# kubectl-view-allocations (crates.io) is one of the baselines: built once into the cache.
bench-headroom: setup
	test -x $(GPUOPS_CACHE)/tools/bin/kubectl-view-allocations || \
	  cargo install --locked kubectl-view-allocations --root $(GPUOPS_CACHE)/tools
	$(PY) bench/headroom_bench.py $(BENCH_ARGS)

bench-headroom-curve: setup
	test -x $(GPUOPS_CACHE)/tools/bin/kubectl-view-allocations || \
	  cargo install --locked kubectl-view-allocations --root $(GPUOPS_CACHE)/tools
	$(PY) bench/headroom_bench.py --curve 500,2000,5000 --repeat 5 $(BENCH_ARGS)
# Tag moves of a 1 MiB and a 1 GiB image against skopeo copy, and a cached rebuild (own lab).
bench-image: setup
	$(PY) bench/image_bench.py $(BENCH_ARGS)
