# make run   — set up .venv (Python 3.11) and run the whole default pipeline + HTML report
# make resume — after a crash or kill -9 of Snakemake: remove its stale lock, then make run
# make test  — set up .venv and run the test suite (.ci/run runs make lint, then this)
# make lint  — ruff check, ruff format --check, snakefmt --check (Snakefile, workflow/rules), snakemake --lint
# make pull  — fetch results from the DVC remote and mark them up to date for Snakemake
# make hooks — have git check commit subjects (.githooks/commit-msg; the set-up runs it too)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
# what the targets below need installed first; `make INSTALL= VENV=DIR …` uses the venv DIR as it is
# (the tests run `make resume` in a copy of the project with the venv they run in: no reinstall into it)
INSTALL ?= $(STAMP)
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: run resume test report dag lint pull clean hooks

# exact versions from constraints.txt (the one lock); torch's CPU build first, so that no package
# pulls a CUDA torch. Where no local CPU wheel is found: make TORCH_INDEX=https://download.pytorch.org/whl/cpu
TORCH_INDEX ?=
$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) torch
	$(BIN)/python -m pip install -q -c constraints.txt -e ".[pipeline,peers,dev,slurm]"
	$(MAKE) --no-print-directory hooks
	rm -f $(VENV)/.installed-* && touch $@

# git runs .githooks/ (commit-msg: a subject of at most 72 characters) where this folder is the
# top of a git checkout (a copy without .git, even inside another repository, sets up nothing)
hooks:
	if [ "$$(git rev-parse --show-toplevel 2>/dev/null)" = "$$(pwd -P)" ]; then \
		git config core.hooksPath .githooks; fi

# --rerun-incomplete: outputs of jobs a crash interrupted are made again (README, Recovering from a crash)
run: $(INSTALL)
	snakemake --cores all --rerun-incomplete
	snakemake --report results/report.html

# only once no Snakemake process (nor a job it started) still runs in this folder: the lock is
# what keeps two of them from writing the same files
resume: $(INSTALL)
	snakemake --unlock
	$(MAKE) run

# the 20 slowest tests are listed last: CI has 20 minutes for the suite on 2 cores (README)
test: $(INSTALL)
	pytest -q --durations=20

report: $(INSTALL)
	snakemake --report results/report.html

dag: $(INSTALL)
	snakemake --dag > results/dag.dot

# ruff (rules in pyproject.toml), snakefmt --check on the Snakefile and rules, snakemake --lint
lint: $(INSTALL)
	ruff check
	ruff format --check
	snakefmt --check Snakefile workflow/rules
	snakemake --lint

# results from the DVC remote, checked against this commit's code and params, then marked
# up to date for Snakemake (checkouts give files new mtimes; see docs/cluster.md)
pull: $(INSTALL)
	dvc pull
	dvc status | grep -q "Data and pipelines are up to date" || { dvc status; exit 1; }
	snakemake --touch --cores 1

clean:
	rm -rf results logs .snakemake
