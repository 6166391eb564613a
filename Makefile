# genward — every entry point a developer or CI needs.
CARGO        ?= cargo
FUZZ_SECONDS ?= 600
FUZZ_TOOLCHAIN ?= nightly
TORTURE_KILLS ?= 200

.PHONY: build release run test torture lint fmt fuzz fuzz-smoke bench clean

build:
	$(CARGO) build

release:
	$(CARGO) build --release

# The main job: the daemon in the foreground with its defaults.
run: release
	./target/release/genward daemon

test:
	$(CARGO) test --all-targets

# The crash-recovery torture test at full length: the daemon SIGKILLed TORTURE_KILLS times
# at random points and restarted on the same state directory (`make test` runs 30).
# GENWARD_TORTURE_SEED=<seed>, as the test prints it, replays a run's choices.
torture:
	GENWARD_TORTURE_KILLS=$(TORTURE_KILLS) $(CARGO) test --test daemon_crash_torture

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
