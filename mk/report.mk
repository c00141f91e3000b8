# Reports from stored runs (suite/report/cli.py): read result JSON only, never re-run anything.
#   make report [RUN=results/<id>] [BASE=results/<id>]   HTML + Markdown + PNGs + CSV in RUN/report/
#                                           (BASE: the summary gives the comparison verdict)
#   make report-csv [RUN=...]               the run's records as CSV on stdout
#   make screenshot [RUN=...] [SHOT=png]    the report's first screen (1400x1800) as a PNG, headless Chromium
#                                           (default RUN/report/first-screen.png; the README's is docs/first-screen.png)
#   make compare BASE=results/<a> NEW=results/<b> [TOLERANCE=0.05] [ALPHA=0.05] [MAX_INCONCLUSIVE=0.1]
#     [ALLOW_CONFIG_DIFF=1] [OUT=dir]   exit 1 on a regression, 3 when too many cases are inconclusive
#     (make says 2 for either; scripts/make-status compare BASE=... NEW=... keeps them)
#     (a side may be several runs: a,b,c, or results/<id> for the runs <id>-r1..rk of REPEAT=k)
RUN       ?= $(RESULTS)/latest
BASE      ?=
NEW       ?=
TOLERANCE ?= 0.05
ALPHA     ?= 0.05
MAX_INCONCLUSIVE ?= 0.1
ALLOW_CONFIG_DIFF ?=
OUT       ?=
SHOT      ?=

.PHONY: report report-csv compare screenshot

report: venv  ## HTML/Markdown report of RUN (default results/latest)
	$(PY) -m suite.report html $(RUN) $(if $(BASE),--base $(BASE))

report-csv: venv  ## the records of RUN as CSV on stdout
	@$(PY) -m suite.report csv $(RUN)

screenshot: venv  ## the first screen of RUN's report as a PNG (SHOT=, default RUN/report/first-screen.png)
	$(PY) -m suite.report screenshot $(RUN) $(if $(SHOT),--out $(SHOT))

compare: venv  ## BASE=<run> NEW=<run>: per-case verdicts; fails on a regression (make-status 1) or if it cannot tell (3)
	@test -n "$(BASE)" -a -n "$(NEW)" || { echo "usage: make compare BASE=results/<run> NEW=results/<run> [NEW=...]" >&2; exit 2; }
	$(PY) -m suite.report compare $(BASE) $(NEW) --tolerance $(TOLERANCE) --alpha $(ALPHA) \
	  --max-inconclusive $(MAX_INCONCLUSIVE) $(if $(filter-out 0,$(ALLOW_CONFIG_DIFF)),--allow-settings-diff) \
	  $(if $(OUT),--out $(OUT))
