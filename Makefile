# hookd — the two commands a newcomer needs are `make demo` and `make test`.
# Everything else wraps CMake (build/ release, build-asan/ sanitizers, build-fuzz/ libFuzzer).

JOBS ?= 2

PREFIX ?= /usr/local

.PHONY: all build build-asan deps test unit blackbox test-postgres tsan demo bench fuzz clean format install

all: build

deps:
	@scripts/deps.sh

build: deps
	@cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build build -j$(JOBS)

build-asan: deps
	@cmake -S . -B build-asan -DHOOKD_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
	@cmake --build build-asan -j$(JOBS)

# Unit tests and black-box tests under AddressSanitizer + UBSan, then a fuzz smoke run.
test:
	@scripts/test.sh

unit: build-asan
	@scripts/test.sh unit

blackbox: build-asan
	@scripts/test.sh blackbox

# The black-box tests with every daemon on a PostgreSQL store (docs/postgres.md).
test-postgres: build-asan
	@scripts/test.sh postgres

# Unit and black-box tests under ThreadSanitizer (not part of make test: longer).
tsan: deps
	@scripts/test.sh tsan

# Installs bin/hookd, lib/systemd/system/hookd.service and the docs under PREFIX (/usr/local),
# from what `make build` built (run as yourself first: no build tools installed, nothing compiled
# as root).
install:
	@test -x build/hookd || { echo "make install: run make build first" >&2; exit 1; }
	@cmake --install build --prefix $(PREFIX)

# Runs hookd on an embedded SQLite file with a local receiver and shows deliveries happening.
demo: build
	@scripts/demo.sh

bench: deps
	@scripts/deps.sh --bench
	@bench/run.sh

fuzz: deps
	@scripts/fuzz.sh long

format:
	@clang-format -i $$(git ls-files '*.c' '*.h')

clean:
	rm -rf build build-asan build-tsan build-fuzz .demo bench/out
