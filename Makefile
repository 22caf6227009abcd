# Threadline — the two commands of the README, and a few helpers.
#   make demo   install, then run the platform on the embedded PostgreSQL with a demo login
#   make test   install, then run the whole test suite against real PostgreSQL and Redis

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
# The suite runs on two workers, each with its own PostgreSQL and browser (docs/adr/0098);
# TEST_WORKERS=0 runs it in this process.
TEST_WORKERS ?= 2

.PHONY: install demo serve test lint format bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is required"'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/threadline migrate
	$(BIN)/threadline demo --url http://$(HOST):$(PORT)
	$(BIN)/threadline serve --host $(HOST) --port $(PORT)

serve: install
	$(BIN)/threadline serve --host $(HOST) --port $(PORT)

test: install
	$(BIN)/pytest -n $(TEST_WORKERS) --dist loadfile

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy app tests migrations bench

bench: install
	$(BIN)/python -m bench.chat_overhead

format: install
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
