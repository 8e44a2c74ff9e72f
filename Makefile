# make run   — set up .venv (Python 3.11) and run the whole default pipeline + HTML report
# make test  — set up .venv and run the test suite (what .ci/run runs)
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: run test report dag lint clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q -e ".[pipeline,peers,dev]"
	rm -f $(VENV)/.installed-* && touch $@

run: $(STAMP)
	snakemake --cores all
	snakemake --report results/report.html

test: $(STAMP)
	pytest -q

report: $(STAMP)
	snakemake --report results/report.html

dag: $(STAMP)
	snakemake --dag > results/dag.dot

lint: $(STAMP)
	snakemake --lint

clean:
	rm -rf results logs .snakemake
