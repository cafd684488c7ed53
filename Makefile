# cnibox: the standard CNI plugins as one static multi-call binary.
TARGET  ?= x86_64-unknown-linux-musl
CARGO   ?= cargo
DESTDIR ?=
BINDIR  ?= /opt/cni/bin
BIN     := target/$(TARGET)/release/cnibox
# install: FORCE=1 replaces other plugins of the same names (the Go ones), moving them into
# BACKUPDIR so that `make uninstall` (or `symlinks.sh --restore`) brings them back.
FORCE   ?=
BACKUPDIR ?= $(DESTDIR)$(BINDIR).pre-cnibox

.PHONY: all build test test-unit test-vm bench bench-compare install uninstall check demo clean fuzz

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

# Only the qemu VM tests (vlan and the smoke test under a Debian kernel; tests/vm/README.md).
test-vm: build
	CNIBOX_STATIC=$(abspath $(BIN)) $(CARGO) test --test vm -- --nocapture

# A newcomer's first five minutes: two containers talking through bridge + portmap, in
# throwaway namespaces (root; nothing on the host changes). See demo.sh.
demo: build
	CNIBOX=$(abspath $(BIN)) ./demo.sh

bench:
	$(CARGO) bench --bench core

bench-compare: build
	benches/compare.sh $(BIN)

# Installs what `make` built (building only when there is no binary yet, so that `sudo make
# install` works where root has no cargo), then links the applets.
install:
	@test -x $(BIN) || $(MAKE) build
	install -D -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/cnibox
	./symlinks.sh $(if $(FORCE),--force) --backup $(BACKUPDIR) $(DESTDIR)$(BINDIR)

# Removes cnibox and its links, and puts back what `make install FORCE=1` moved aside.
uninstall:
	@if [ -x $(DESTDIR)$(BINDIR)/cnibox ]; then \
		CNIBOX=$(DESTDIR)$(BINDIR)/cnibox ./symlinks.sh --remove $(DESTDIR)$(BINDIR); fi
	@if [ -d $(BACKUPDIR) ]; then ./symlinks.sh --restore $(BACKUPDIR) $(DESTDIR)$(BINDIR); fi
	rm -f $(DESTDIR)$(BINDIR)/cnibox

check:
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets -- -D warnings

clean:
	$(CARGO) clean
