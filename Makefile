# attnlab: two commands do all the set-up on a fresh machine.
#   make demo   create .venv, install attnlab, run every preset at quick size into results/, print the checks table
#   make test   create .venv if needed, install the test extras, run the test suite
#   make docs   build the documentation site into site/ (MkDocs, --strict)
#   make catalogue   write the catalogue of attnlab's own presets that the package ships (after editing a source)
#   make test-fast   the inner loop: the suite without the command-line/sweep integration tests and slow tests
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip -q
# pip would compile every installed module to bytecode one file at a time, on one core: for make demo and make docs
# the packages are installed with --no-compile and compiled by compileall on every core instead, without the
# packages' own test suites, which nothing imports; attnlab's own sources (an editable install) too, for a
# PYTHONDONTWRITEBYTECODE environment, where no process would write their bytecode and every one would compile them
# again (make test sets its processes to write it instead: TEST_ENV)
COMPILE := $(PY) -m compileall -q -j 0 -x '/tests?/' $(VENV)/lib src

.PHONY: demo test test-fast docs lint catalogue bench bench-table clean

# the virtual environment, created unless it exists, with uv for the installs below: pip downloads and unpacks the
# packages one at a time, uv in parallel, resolving the same versions. Where uv cannot be installed the installs use
# pip, upgraded first.
VENV_NEW := test -x $(PY) || { $(PYTHON) -m venv $(VENV) && { $(PIP) install uv || $(PIP) install --upgrade pip; }; }
# $(call INSTALL,ARGS): pip install ARGS, run by uv where the environment has it, else by pip (no bytecode compiled)
INSTALL = if $(PY) -m uv --version >/dev/null 2>&1; then $(PY) -m uv pip install -q --python $(PY) $(1); \
	  else $(PIP) install --no-compile $(1); fi

$(VENV)/.installed: pyproject.toml
	$(VENV_NEW)
	$(call INSTALL,-e .)
	$(COMPILE)
	touch $@

# attnlab with its test extras and the tests' plugin in one resolution, without compileall: the suite's processes
# write the bytecode of the modules they import themselves (TEST_ENV), about half of those installed
$(VENV)/.installed-test: pyproject.toml examples/plugins/attnlab-icl/pyproject.toml
	$(VENV_NEW)
	$(call INSTALL,-e '.[test]' -e examples/plugins/attnlab-icl)
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/attnlab reproduce --quick --out results

# the tests' processes write bytecode whatever PYTHONDONTWRITEBYTECODE says (an empty value is unset for Python)
TEST_ENV := PYTHONDONTWRITEBYTECODE=

test: $(VENV)/.installed-test
	$(TEST_ENV) $(PY) tools/run_tests.py -q -n 2 --dist loadfile --durations=30

test-fast: $(VENV)/.installed-test
	$(TEST_ENV) $(PY) tools/run_tests.py -q -n 2 --dist loadfile -m "not slow" --ignore=tests/app --durations=10

$(VENV)/.installed-docs: $(VENV)/.installed
	$(call INSTALL,-e '.[docs]')
	$(COMPILE)
	touch $@

docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

lint: $(VENV)/.installed-test
	$(VENV)/bin/ruff check src tests bench tools

catalogue: $(VENV)/.installed
	$(PY) tools/catalogue.py

bench: $(VENV)/.installed
	$(PY) tools/bench_table.py --run

bench-table:
	python3 tools/bench_table.py

clean:
	rm -rf results .pytest_cache
