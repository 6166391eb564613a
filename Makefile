# genward — every entry point a developer or CI needs.
CARGO        ?= cargo
FUZZ_SECONDS ?= 600
FUZZ_TOOLCHAIN ?= nightly

.PHONY: build release run test lint fmt fuzz fuzz-smoke bench clean

build:
	$(CARGO) build

release:
	$(CARGO) build --release

# The main job: the daemon in the foreground with its defaults.
run: release
	./target/release/genward daemon

test:
	$(CARGO) test --all-targets

# Tests build the crate with its `testkit` feature (a dev-dependency on itself); the
# second clippy checks the library and daemon as shipped, without it.
lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --all-targets -- -D warnings
	$(CARGO) clippy --lib --bins -- -D warnings

fmt:
	$(CARGO) fmt --all

# Coverage-guided fuzzing on nightly: FUZZ_SECONDS per target.
fuzz:
	@./fuzz/run-all.sh $(FUZZ_TOOLCHAIN) $(FUZZ_SECONDS)

fuzz-smoke:
	@./fuzz/run-all.sh $(FUZZ_TOOLCHAIN) 30

bench:
	$(CARGO) bench

clean:
	$(CARGO) clean
