# cnibox: the standard CNI plugins as one static multi-call binary.
TARGET  ?= x86_64-unknown-linux-musl
CARGO   ?= cargo
DESTDIR ?=
BINDIR  ?= /opt/cni/bin
BIN     := target/$(TARGET)/release/cnibox
# Edge devices: `make TARGET=aarch64-unknown-linux-musl` or `TARGET=armv7-unknown-linux-musleabihf`
# (linked by rust-lld, see .cargo/config.toml; `rustup target add TARGET` once).
ARM_TARGETS := aarch64-unknown-linux-musl armv7-unknown-linux-musleabihf
# A target whose std the default toolchain lacks is built with CROSS_TOOLCHAIN when that one
# has it: the package mirror CI uses serves no armv7 musl std for the current release, so
# .ci/run installs this older one for armv7 (`rustup toolchain install 1.93.0 --target ...`).
CROSS_TOOLCHAIN ?= 1.93.0
RUST_SYSROOT := $(shell rustc --print sysroot 2>/dev/null)
RUSTUP_DIR := $(or $(RUSTUP_HOME),$(HOME)/.rustup)
has_std = $(wildcard $(1)/lib/rustlib/$(2)/lib)
cargo_for = $(CARGO)$(if $(call has_std,$(RUST_SYSROOT),$(1)),,$(if \
	$(call has_std,$(RUSTUP_DIR)/toolchains/$(CROSS_TOOLCHAIN)-*,$(1)), +$(CROSS_TOOLCHAIN)))
# install: FORCE=1 replaces other plugins of the same names (the Go ones), moving them into
# BACKUPDIR so that `make uninstall` (or `symlinks.sh --restore`) brings them back.
FORCE   ?=
BACKUPDIR ?= $(DESTDIR)$(BINDIR).pre-cnibox

.PHONY: all build build-arm release test test-unit test-unit-arm test-vm test-vm-arm bench bench-compare bench-peers hot-order install uninstall check demo clean fuzz fuzz-long

all: build

# cargo must be in PATH; under sudo, root's PATH usually lacks the user's: say what to do. The
# Rust target is added when rustup has not got it yet.
ROOT_PATH_HINT = run make as yourself (it asks sudo for what needs root), or keep your PATH: sudo env "PATH=$$PATH" make
have_cargo = @command -v $(CARGO) >/dev/null || { echo 'make: $(CARGO) is not in PATH$(if \
	$(SUDO_USER), (root has not got $(SUDO_USER)'"'"'s): $(ROOT_PATH_HINT), (install Rust: https://rustup.rs))' >&2; exit 1; }
add_target = @! command -v rustup >/dev/null || rustup target list --installed | grep -qx $(1) \
	|| rustup target add $(1)

build:
	$(have_cargo)
	$(call add_target,$(TARGET))
	$(call cargo_for,$(TARGET)) build --release --target $(TARGET)

# Both ARM targets (static, stripped, as `make TARGET=...` builds them).
build-arm:
	$(foreach t,$(ARM_TARGETS),$(call cargo_for,$(t)) build --release --target $(t) &&) true

# Release archives in upstream's layout, one per architecture, with their .sha256 and .sha512:
# target/release-archives/cnibox-linux-{amd64,arm64,arm}-vVERSION.tgz (contrib/release.sh;
# reproducible, SOURCE_DATE_EPOCH defaults to the last commit's time). The ARM applet names are
# read from the ARM binaries under qemu-user (qemu-user-static).
RELEASE_DIR ?= target/release-archives
release: build build-arm
	rm -rf $(RELEASE_DIR)
	contrib/release.sh $(BIN) amd64 $(RELEASE_DIR)
	contrib/release.sh target/aarch64-unknown-linux-musl/release/cnibox arm64 $(RELEASE_DIR)
	contrib/release.sh target/armv7-unknown-linux-musleabihf/release/cnibox arm $(RELEASE_DIR)

# Everything: unit tests, integration tests that exec the binary (privileged ones need root),
# compatibility tests against /usr/lib/cni when the reference plugins are installed.
# The VM test (vlan under a Debian kernel in qemu) boots the static release binary; the ARM VM
# test (tests/vm_arm.rs) boots the ARM builds under qemu-system-aarch64/-arm. Where the ARM
# builds fail (no target std), their tests skip, or fail under CNIBOX_REQUIRE_ALL=1.
# As yourself or as root: .ci/setup first installs what is missing (Debian packages, Rust
# targets, ARM kernels; sudo where root is needed), the tests are built as you and run as root.
AS_ROOT = $(if $(filter 0,$(shell id -u)),,sudo env "PATH=$$PATH" RUSTUP_HOME="$${RUSTUP_HOME:-$$HOME/.rustup}" \
	CARGO_HOME="$${CARGO_HOME:-$$HOME/.cargo}" CNIBOX_REQUIRE_ALL="$$CNIBOX_REQUIRE_ALL" CNIBOX_VM_REQUIRED="$$CNIBOX_VM_REQUIRED")
test:
	$(have_cargo)
	.ci/setup
	$(MAKE) build
	$(MAKE) build-arm || echo "make test: the ARM builds failed; their VM tests cannot pass" >&2
	$(CARGO) test --no-fail-fast --no-run
	$(AS_ROOT) CNIBOX_STATIC=$(abspath $(BIN)) $(ARM_ENV) $(CARGO) test --no-fail-fast

# The fuzzers at length (make test runs 3,000 executions of each): FUZZ_SEED=N to vary them.
# The applet fuzzer runs the release binary (what a node runs: panic = abort, no std runtime)
# over every applet; the parser fuzzers (DHCP packets, netlink replies, tuning allowlist,
# flannel subnet.env) run in-process in the test profile, so integer overflow panics too.
# Both run even when the first fails; either failing fails the target.
fuzz:
	status=0; \
	FUZZ_EXECS=$${FUZZ_EXECS:-50000} $(CARGO) test --release --test fuzz -- --nocapture || status=1; \
	FUZZ_PARSER_EXECS=$${FUZZ_PARSER_EXECS:-100000} $(CARGO) test --test fuzz_parsers -- --nocapture || status=1; \
	exit $$status

# Coverage-guided fuzzing (fuzz/: cargo-fuzz, libFuzzer, the nightly toolchain): each target
# for FUZZ_SECONDS from the seeds in tests/fuzz/<target>/ (new inputs go to fuzz/corpus/, not
# committed). Debug assertions on, so integer overflow is a crash, as in the test profile; no
# sanitizer (the parsers are safe Rust: ASan would only slow them). A crash, timeout or OOM
# input is copied into tests/fuzz/<target>/, where tests/fuzz_parsers.rs (corpus_replay)
# replays it in CI; the run's final cov/ft/exec/s go to fuzz/artifacts/<target>.log.
FUZZ_SECONDS ?= 120
FUZZ_TARGETS ?= dhcp gob netlink dbus nftables cache config
FUZZ_FLAGS = -s none --debug-assertions
# A fixed build identity: build.rs's `git status` refreshes the index, which would make every
# cargo call of the loop rebuild the crate.
FUZZ_ENV = CNIBOX_COMMIT=fuzz-long
fuzz-long:
	cd fuzz && $(FUZZ_ENV) cargo +nightly fuzz build $(FUZZ_FLAGS)
	status=0; for t in $(FUZZ_TARGETS); do \
	  mkdir -p fuzz/corpus/$$t fuzz/artifacts/$$t; \
	  ( cd fuzz && $(FUZZ_ENV) cargo +nightly fuzz run $(FUZZ_FLAGS) $$t corpus/$$t ../tests/fuzz/$$t -- \
	    -max_total_time=$(FUZZ_SECONDS) -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
	  ) >fuzz/artifacts/$$t.log 2>&1 || status=1; \
	  grep -E '^#[0-9]+[[:space:]]+DONE|^stat::number_of_executed_units|^stat::average_exec_per_sec|^==[0-9]+==' \
	    fuzz/artifacts/$$t.log | sed "s/^/$$t: /"; \
	  for f in fuzz/artifacts/$$t/crash-* fuzz/artifacts/$$t/timeout-* fuzz/artifacts/$$t/oom-*; do \
	    [ -f "$$f" ] && cp "$$f" tests/fuzz/$$t/ && echo "$$t: kept $$f in tests/fuzz/$$t/"; \
	  done; \
	done; exit $$status

# The unit tests on 32-bit ARM under qemu-user (qemu-arm-static): code that assumes a 64-bit
# usize or time_t fails here. qemu-user refuses nf_tables netlink sockets and does not translate
# rtnetlink's FIB rule and RTM_GETNETCONF messages (EOPNOTSUPP), so the nf_tables, rule and
# forwarding round trips (netfilter::tests, the iptables backend's commit watch,
# netlink::tests::rules_round_trip, sysctl::tests::forwarding_over_netlink; the plugins fall
# back to /proc/sys there, and to waiting for iptables-restore's exit) are left to
# the x86 run and the VM test. A dev-dependency's C file (criterion's
# alloca) is compiled by Debian's arm-linux-gnueabihf-gcc.
ARMV7 := armv7-unknown-linux-musleabihf
test-unit-arm:
	CC_armv7_unknown_linux_musleabihf=arm-linux-gnueabihf-gcc \
	CFLAGS_armv7_unknown_linux_musleabihf=-ffreestanding \
	CARGO_TARGET_ARMV7_UNKNOWN_LINUX_MUSLEABIHF_RUNNER=qemu-arm-static \
	$(call cargo_for,$(ARMV7)) test --lib --target $(ARMV7) -- --skip netfilter::tests:: --skip netfilter::iptables::direct::tests:: --skip netlink::tests::rules_round_trip \
		--skip netfilter::iptables::commits::tests::a_commit_is_seen_before_the_exit \
		--skip sysctl::tests::forwarding_over_netlink

ARM_ENV = CNIBOX_STATIC_AARCH64=$(abspath target/aarch64-unknown-linux-musl/release/cnibox) \
	CNIBOX_STATIC_ARMV7=$(abspath target/armv7-unknown-linux-musleabihf/release/cnibox)

test-unit:
	$(CARGO) test --lib

# Only the qemu VM tests (vlan and the smoke test under a Debian kernel; tests/vm/README.md).
test-vm: build
	CNIBOX_STATIC=$(abspath $(BIN)) $(CARGO) test --test vm -- --nocapture

# Only the ARM VM smoke tests (tests/vm/fetch-arch.sh aarch64 armv7 fetches their kernels).
test-vm-arm: build-arm
	$(ARM_ENV) $(CARGO) test --test vm_arm -- --nocapture

# A newcomer's first five minutes: two containers talking through bridge + portmap, in
# throwaway namespaces (root; nothing on the host changes). See demo.sh.
demo: build
	.ci/setup --demo
	$(if $(filter 0,$(shell id -u)),,sudo) env CNIBOX=$(abspath $(BIN)) ./demo.sh

bench:
	$(CARGO) bench --bench core

# netavark's columns need Debian's netavark (1.4) and a Debian unstable root for 1.17 and podman 5.8,
# made once outside the repository (benches/peers-root.sh: debootstrap, then apt-get in it);
# without them compare.sh leaves those columns and rows out with a note. compare.sh also runs
# benches/podman.sh and benches/cri.sh (~4 min of a full run; CLIENTS=0 skips them).
bench-compare: build
	-benches/peers-root.sh
	benches/compare.sh $(BIN)

# The peers (issue 28), printed, nothing written: podman's default network against netavark,
# `podman run --rm` on CNI (cnibox on iptables and nftables, reference) and on netavark (1.4
# under podman 4.3, 1.17 under podman 5.8), pods through containerd's CRI.
bench-peers: build
	-benches/peers-root.sh
	PEERS_ONLY=1 benches/compare.sh $(BIN)
	benches/podman.sh $(BIN)
	benches/cri.sh $(BIN)

# Regenerates .cargo/hot-functions.txt, the functions the linker packs together (.cargo/ld-order),
# from callgrind runs of an unstripped release build (benches/hot-order.sh: root, valgrind).
# Commit the list with the code it describes; tests/install.rs fails when it has gone stale.
hot-order:
	CARGO_PROFILE_RELEASE_STRIP=false $(CARGO) build --release --target $(TARGET) --target-dir target/hot
	benches/hot-order.sh target/hot/$(TARGET)/release/cnibox

# Installs what `make` built (building only when there is no binary yet, so that `sudo make
# install` works where root has no cargo): `cnibox install` copies itself into BINDIR and links
# the applets (through symlinks.sh, which runs a cross build under qemu-user).
install:
	@test -x $(BIN) || $(MAKE) build
	CNIBOX=$(BIN) ./symlinks.sh $(if $(FORCE),--force) --backup $(BACKUPDIR) $(DESTDIR)$(BINDIR)

# Removes cnibox and its links, and puts back what `make install FORCE=1` moved aside.
uninstall:
	@if [ -x $(DESTDIR)$(BINDIR)/cnibox ]; then \
		./symlinks.sh --remove $(DESTDIR)$(BINDIR); \
		if [ -d $(BACKUPDIR) ]; then ./symlinks.sh --restore $(BACKUPDIR) $(DESTDIR)$(BINDIR); fi; fi
	rm -f $(DESTDIR)$(BINDIR)/cnibox

check:
	$(CARGO) fmt --check
	$(CARGO) clippy --all-targets -- -D warnings
	$(CARGO) test --test testkit

clean:
	$(CARGO) clean
