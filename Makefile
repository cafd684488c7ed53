# cnibox: the standard CNI plugins as one static multi-call binary.
TARGET  ?= x86_64-unknown-linux-musl
CARGO   ?= cargo
DESTDIR ?=
BINDIR  ?= /opt/cni/bin
BIN     := target/$(TARGET)/release/cnibox

.PHONY: all build test test-unit test-vm bench bench-compare install check demo clean fuzz

all: build

build:
	$(CARGO) build --release --target $(TARGET)

# Everything: unit tests, integration tests that exec the binary (privileged ones need root),
# compatibility tests against /usr/lib/cni when the reference plugins are installed.
# The VM test (vlan under a Debian kernel in qemu) boots the static release binary.
test: build
	CNIBOX_STATIC=$(abspath $(BIN)) $(CARGO) test --no-fail-fast

# The mutation fuzzer at length (make test runs 3,000 executions): FUZZ_SEED=N to vary it.
fuzz:
	FUZZ_EXECS=$${FUZZ_EXECS:-20000} $(CARGO) test --release --test fuzz -- --nocapture

test-unit:
	$(CARGO) test --lib

bench:
	$(CARGO) bench --bench core

bench-compare: build
	benches/compare.sh $(BIN)

install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/cnibox
	./symlinks.sh $(DESTDIR)$(BINDIR)

check:
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets -- -D warnings

clean:
	$(CARGO) clean
