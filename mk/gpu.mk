# GPU hosts: tests that need CUDA, and a reference report of `make bench-gpu`.
#   make reference-gpu            on a GPU host; commit results/reference/<name>/ afterwards
REF_MAX_BYTES ?= 64M
REF_NAME      ?=

.PHONY: test-gpu reference-gpu

test-gpu: venv
	$(PY) -m pytest tests -m gpu $(PYTEST_ARGS)

# A quick sweep (1K..REF_MAX_BYTES) on every local GPU, stored under results/reference/
# named by GPU model, count and UTC date, with the command that produced it and its report.
reference-gpu: venv
	@name=$(or $(REF_NAME),$$($(PY) -c "import re, time, torch; \
	  n = torch.cuda.device_count(); g = torch.cuda.get_device_name(0) if n else 'nogpu'; \
	  print(re.sub(r'[^A-Za-z0-9]+', '-', g).strip('-').lower() + f'-x{n}-' + time.strftime('%Y%m%d', time.gmtime()))")); \
	cmd="make bench-gpu MAX_BYTES=$(REF_MAX_BYTES) RESULTS=results/reference RUN_ID=$$name $(MAKEOVERRIDES)"; \
	echo "$$cmd"; $(MAKE) bench-gpu MAX_BYTES=$(REF_MAX_BYTES) RESULTS=results/reference RUN_ID=$$name || exit $$?; \
	{ echo "# produced by: $$cmd"; echo "# commit: $$(git rev-parse HEAD 2>/dev/null)"; } > results/reference/$$name/COMMAND; \
	$(PY) -m suite.report results/reference/$$name > results/reference/$$name/report.txt; \
	rm -f results/reference/latest; \
	echo "reference report: results/reference/$$name (commit it)"
