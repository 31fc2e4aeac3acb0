# Two commands do all set-up on a fresh machine: `make run` and `make test`.
DATA_DIR ?= ./.data
export DATA_DIR

.PHONY: run test bench deps services typecheck

# The API and the workers as two processes, the workers at a lower CPU priority (bin/run-local.ts).
run: deps services
	npm run --silent start

# Colours on a terminal only: vitest colours whatever stdout is, and a log file or pipe wants plain text.
test: deps services
	@bash infra/scripts/install-browser.sh
	@bash infra/scripts/install-prometheus.sh
	@if [ -t 1 ]; then npx vitest run; else NO_COLOR=1 npx vitest run; fi

bench: deps services
	npx tsx bench/run.ts

typecheck: deps
	npx tsc --noEmit -p .

deps: node_modules/.installed

# `npm install` rather than `npm ci`: npm 11 leaves other platforms' optional packages out of
# the lock file and `npm ci` then refuses it; `npm install` follows the lock all the same.
node_modules/.installed: package.json package-lock.json
	npm install --no-audit --no-fund --loglevel=error
	@touch $@

# Postgres and Redis on loopback: used as they are when they answer, else installed and started.
services:
	@bash infra/scripts/local-services.sh
