# percolator — build, test and run.
#
#   make            build bin/percolator-oracle, bin/percolator-service and
#                   bin/percolator (the command-line client)
#   make test       install missing Debian packages (as root), build, run every
#                   test plain and then under AddressSanitizer + UBSan
#   make run        start the oracle and the service on 127.0.0.1, data in ./data
#                   (ORACLE_LISTEN, SERVICE_LISTEN, RUN_DATA_DIR). If one cannot
#                   start, scripts/run.sh says why and exits 1, which make reports
#                   as "run] Error 1" and exits 2 (make's status for a failed
#                   recipe); run scripts/run.sh itself for its own status
#   make bench      benchmarks (see README)
#   make check-layers  no call loops in engine/ or service/, WiredTiger only in engine/
#   make api-check  check api-spec/service.yaml and oracle.yaml are generated
#                   from percolator.yaml, lint them, self-test the validator,
#                   validate the HTTP exchanges the tests recorded, and run
#                   the README tour and those requests through Prism
#   make fuzz       run every libFuzzer harness FUZZ_SECONDS each (fuzz/fuzz.mk)
#   make docker-test  build the image with podman (and Docker) from scratch and
#                   run the compose files for real (root; see README "Containers")
#   make man        man pages of the three programs from their --help (build/man)
#   make install    programs, man pages, bash completion, systemd units and their
#                   settings' examples under PREFIX (/usr/local); DESTDIR for packages
#   make uninstall  remove what make install put there (same PREFIX and DESTDIR)
#   make check-packaging  install into temporary directories and check the result:
#                   the files, systemd-analyze verify, man pages, bash completion
#   make systemd-test  run the installed units under systemd in a podman container (root)
#   make clean
#
# Out-of-tree builds: BUILD=dir puts objects and test binaries there; SAN=1
# builds the sanitizer flavour into build/asan (binaries in build/asan/bin).

CC      ?= cc
SAN     ?= 0

# The Debian bookworm packages the project needs to build and test
# (iptables: the oracle's partition test cuts a member off on loopback;
# clang and libclang-rt-14-dev: the fuzz harnesses and their libFuzzer;
# openssl: the TLS test makes its certificates; help2man: the man pages;
# man-db, bash-completion and systemd: make check-packaging renders the
# pages, runs the completion and verifies the units with systemd-analyze).
DEB_PKGS = gcc binutils make pkg-config curl libwiredtiger-dev wiredtiger \
           libmicrohttpd-dev libjansson-dev libcurl4-openssl-dev libcmocka-dev \
           libraft-dev libuv1-dev libgnutls28-dev openssl iptables clang \
           libclang-rt-14-dev help2man man-db bash-completion systemd

ifeq ($(SAN),1)
BUILD   ?= build/asan
BINDIR  ?= $(BUILD)/bin
SANFLAGS = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
OPT      = -O1
else
BUILD   ?= build/plain
BINDIR  ?= bin
SANFLAGS =
OPT      = -O2
endif

CFLAGS  = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -g $(OPT) -pthread \
          -MMD -MP $(SANFLAGS) $(EXTRA_CFLAGS)
# Each folder sees only the headers of the layers under it, so that a wrong
# include does not compile: the engine speaks WiredTiger only, the service
# speaks engine.h and common/, nothing includes the service.
INC_engine  = -Iengine
INC_common  = -Icommon
INC_oracle  = -Icommon -Ioracle
INC_service = -Icommon -Iengine -Iservice
INC_cli     = -Icommon
INC_tests   = -Icommon -Iengine -Ioracle -Iservice -Itests/lib
INC_bench   = $(INC_tests)
LDFLAGS = -pthread $(SANFLAGS)
LDLIBS  = -lwiredtiger -lmicrohttpd -lgnutls -ljansson -lcurl -lraft -luv -lm

# Every .c under these folders goes into one static library; the programs are
# the two main.c files, the tests link what they use from the library.
LIB_SRC  = $(wildcard common/*.c engine/*.c) \
           $(filter-out oracle/main.c,$(wildcard oracle/*.c)) \
           $(filter-out service/main.c,$(wildcard service/*.c))
# The client speaks only HTTP: its own files and three of common/, no library.
CLI_OBJ  = $(patsubst %.c,$(BUILD)/%.o,$(wildcard cli/*.c) common/buf.c common/token.c common/tar.c common/base64.c)
TLIB_SRC = $(wildcard tests/lib/*.c)
UNIT_SRC = $(wildcard tests/unit/test_*.c)
INTEG_SRC = $(wildcard tests/integration/test_*.c)

LIB_OBJ  = $(LIB_SRC:%.c=$(BUILD)/%.o)
TLIB_OBJ = $(TLIB_SRC:%.c=$(BUILD)/%.o)
LIB      = $(BUILD)/libpercolator.a
# A program is built once its main.c exists.
PROGS    = $(if $(wildcard oracle/main.c),$(BINDIR)/percolator-oracle) \
           $(if $(wildcard service/main.c),$(BINDIR)/percolator-service) \
           $(if $(wildcard cli/main.c),$(BINDIR)/percolator)
UNIT_BIN = $(UNIT_SRC:tests/unit/%.c=$(BUILD)/tests/unit/%)
INTEG_BIN = $(INTEG_SRC:tests/integration/%.c=$(BUILD)/tests/integration/%)

.PHONY: all deps test check check-layers unit integration run bench bench-tools bench-oracle bench-failover bench-catchup bench-cluster bench-watch bench-leases bench-soak bench-regions bench-regions-group bench-pd bench-groups clean \
        man install uninstall check-packaging
.SECONDARY:
all: $(PROGS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(INC_$(firstword $(subst /, ,$<))) -c $< -o $@

$(LIB): $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BINDIR)/percolator-oracle: $(BUILD)/oracle/main.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BINDIR)/percolator-service: $(BUILD)/service/main.o $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(BINDIR)/percolator: $(CLI_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ -ljansson -lcurl -o $@

$(BUILD)/tests/%: $(BUILD)/tests/%.o $(TLIB_OBJ) $(LIB)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -lcmocka -o $@

# Benchmark programs: bench/<name>.c + the test helpers (to start programs).
$(BUILD)/bench/%: $(BUILD)/bench/%.o $(TLIB_OBJ) $(LIB)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -lcmocka -o $@

# deps: install what is missing when root, else say the one line to run.
deps:
	@missing=""; for p in $(DEB_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	command -v node >/dev/null 2>&1 || missing="$$missing nodejs npm"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    echo "installing:$$missing"; \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing >/dev/null || exit 1; \
	  else \
	    echo "missing Debian packages; run: sudo apt-get install -y$$missing"; exit 1; \
	  fi; \
	fi

# test: everything, plain and under the sanitizers (and, after the plain
# run, the layering and the packaging, a few seconds each), then every HTTP
# exchange the integration tests made checked against the OpenAPI spec,
# then a short run of every fuzz harness (about 8 s each).
test: deps
	$(MAKE) check SAN=0
	$(MAKE) check-layers SAN=0
	$(MAKE) check-packaging SAN=0
	$(MAKE) check SAN=1
	$(MAKE) api-check
	$(MAKE) fuzz FUZZ_SECONDS=8

# check: build this flavour and run its unit then integration tests,
# TEST_JOBS programs at a time (tests/run.sh: each takes its own ports and
# directories; most of their time is spent waiting on elections and TTLs).
TEST_JOBS ?= 2
check: $(PROGS) $(UNIT_BIN) $(INTEG_BIN)
	rm -rf $(BUILD)/exchanges && mkdir -p $(BUILD)/exchanges
	PERCOLATOR_BIN_DIR=$(abspath $(BINDIR)) PERCOLATOR_EXCHANGE_DIR=$(abspath $(BUILD))/exchanges \
	  PERCOLATOR_TEST_JOBS=$(TEST_JOBS) tests/run.sh $(UNIT_BIN) $(INTEG_BIN)

# check-layers: no call loop between the files of engine/ or service/, the
# engine calls nothing above it, nothing but the engine calls WiredTiger
# (scripts/check-layers.sh reads the compiled objects).
check-layers: $(PROGS)
	scripts/check-layers.sh $(BUILD)

# (test_service_local starts the real oracle: the programs come first.)
unit: $(PROGS) $(UNIT_BIN)
	PERCOLATOR_BIN_DIR=$(abspath $(BINDIR)) tests/run.sh $(UNIT_BIN)

integration: $(PROGS) $(INTEG_BIN)
	PERCOLATOR_BIN_DIR=$(abspath $(BINDIR)) tests/run.sh $(INTEG_BIN)

run: deps all
	scripts/run.sh

# man: a page for each program (build/man/NAME.1), made by help2man from its
# --help and --version, with the sections of packaging/man/NAME.h2m (name,
# exit statuses, files, see also); each `env PERCOLATOR_...` line of a
# flag starts a line of its own.
MAN_PAGES = $(patsubst $(BINDIR)/%,build/man/%.1,$(PROGS))
man: $(MAN_PAGES)

build/man/%.1: $(BINDIR)/% packaging/man/%.h2m
	@command -v help2man >/dev/null 2>&1 || { echo "man: help2man not found; run make deps (as root) or apt-get install help2man"; exit 1; }
	@mkdir -p $(dir $@)
	help2man --no-info --include=packaging/man/$*.h2m --output=$@.tmp $(BINDIR)/$*
	sed '/^env PERCOLATOR_/i .br' $@.tmp >$@ && rm -f $@.tmp

# install: where (DESTDIR is put before each, for a package's staging tree).
# The units run $(bindir)'s programs and read $(sysconfdir)/default/NAME;
# systemd looks for units in /usr/local/lib/systemd/system and
# /usr/lib/systemd/system, bash-completion in /usr/local/share and
# /usr/share, so PREFIX=/usr/local (the default) or /usr needs nothing more.
PREFIX         ?= /usr/local
bindir         ?= $(PREFIX)/bin
datadir        ?= $(PREFIX)/share
mandir         ?= $(datadir)/man
docdir         ?= $(datadir)/doc/percolator
bashcompdir    ?= $(datadir)/bash-completion/completions
systemdunitdir ?= $(PREFIX)/lib/systemd/system
sysconfdir     ?= /etc
UNITS          = percolator-oracle percolator-service
SUBST = sed -e 's|@bindir@|$(bindir)|g' -e 's|@datadir@|$(datadir)|g' \
            -e 's|@sysconfdir@|$(sysconfdir)|g' -e 's|@systemdunitdir@|$(systemdunitdir)|g'

# install: the programs, their man pages, the client's bash completion, the
# service's OpenAPI document (its /openapi.yaml), a systemd unit for each
# server and an example of its settings file, in $(docdir) and, unless one
# is there already (never overwritten), in $(sysconfdir)/default.
install: all man
	install -d $(DESTDIR)$(bindir) $(DESTDIR)$(mandir)/man1 $(DESTDIR)$(bashcompdir) \
	  $(DESTDIR)$(datadir)/percolator $(DESTDIR)$(docdir) $(DESTDIR)$(systemdunitdir) \
	  $(DESTDIR)$(sysconfdir)/default
	install -m 0755 $(PROGS) $(DESTDIR)$(bindir)/
	install -m 0644 $(MAN_PAGES) $(DESTDIR)$(mandir)/man1/
	install -m 0644 packaging/bash-completion/percolator $(DESTDIR)$(bashcompdir)/percolator
	install -m 0644 api-spec/service.yaml $(DESTDIR)$(datadir)/percolator/service.yaml
	set -e; for u in $(UNITS); do \
	  $(SUBST) packaging/systemd/$$u.service.in >$(DESTDIR)$(systemdunitdir)/$$u.service; \
	  $(SUBST) packaging/default/$$u.in >$(DESTDIR)$(docdir)/$$u.default; \
	  chmod 0644 $(DESTDIR)$(systemdunitdir)/$$u.service $(DESTDIR)$(docdir)/$$u.default; \
	  [ -e $(DESTDIR)$(sysconfdir)/default/$$u ] || \
	    install -m 0644 $(DESTDIR)$(docdir)/$$u.default $(DESTDIR)$(sysconfdir)/default/$$u; \
	done

# uninstall: remove those files; a settings file in $(sysconfdir)/default
# only while it is still the example (an edited one is kept).
uninstall:
	rm -f $(addprefix $(DESTDIR)$(bindir)/,$(notdir $(PROGS))) \
	  $(patsubst build/man/%,$(DESTDIR)$(mandir)/man1/%,$(MAN_PAGES)) \
	  $(DESTDIR)$(bashcompdir)/percolator $(DESTDIR)$(datadir)/percolator/service.yaml
	set -e; for u in $(UNITS); do \
	  if [ -f $(DESTDIR)$(docdir)/$$u.default ] && cmp -s $(DESTDIR)$(docdir)/$$u.default $(DESTDIR)$(sysconfdir)/default/$$u; then \
	    rm -f $(DESTDIR)$(sysconfdir)/default/$$u; fi; \
	  rm -f $(DESTDIR)$(systemdunitdir)/$$u.service $(DESTDIR)$(docdir)/$$u.default; \
	done
	rmdir $(DESTDIR)$(docdir) $(DESTDIR)$(datadir)/percolator 2>/dev/null || true

# check-packaging: packaging/check.sh: make install into a staging DESTDIR
# (the files, their paths, the programs' --version, each man page renders
# without a warning), make uninstall leaves nothing; make install into a
# temporary PREFIX, whose units `systemd-analyze verify` accepts; the bash
# completion's answers, and it knows every command and option of
# `percolator --help`. A few seconds.
check-packaging: all man
	MAKE="$(MAKE)" BINDIR=$(BINDIR) packaging/check.sh

# systemd-test: packaging/systemd-test.sh: the units under a real systemd,
# booted in a podman container on a bookworm root made with mmdebstrap:
# both start, sandboxed; a token as a credential; reload; restarts after
# SIGKILL and exit 70, none after exit 2; a clean stop (root; about a minute).
.PHONY: systemd-test
systemd-test: all man
	MAKE="$(MAKE)" packaging/systemd-test.sh

# bench: the service and the oracle under load (bench/bench.sh; BENCH_SECONDS
# per row, default 5; about 5 minutes with bench-failover at its end).
# bench/compare-etcd.sh runs the same load generator against etcd and the
# service side by side.
BENCH_TOOLS = $(BUILD)/bench/loadgen $(BUILD)/bench/mhd_empty $(BUILD)/bench/watchers $(BUILD)/bench/pd_bench \
              $(BUILD)/bench/groups_bench
bench: deps bench-tools
	PERCOLATOR_BIN_DIR=$(abspath $(BINDIR)) BENCH_BIN_DIR=$(abspath $(BUILD))/bench bench/bench.sh
	@echo; $(MAKE) --no-print-directory bench-oracle
	@echo; $(MAKE) --no-print-directory bench-failover
	@echo; $(MAKE) --no-print-directory bench-cluster

# bench-cluster: three service members (Raft) over three oracle members
# against a three-member etcd 3.4: point read / write / 2-key txn through
# the leaders, read and write through a follower, at 16, 64 and 256
# connections, p50/p99/p99.9 and a picture of them (bench/compare-etcd-
# cluster.sh; about 7 minutes; installs etcd-server and gnuplot-nox).
bench-cluster: bench-tools
	PERCOLATOR_BIN_DIR=$(abspath $(BINDIR)) BENCH_BIN_DIR=$(abspath $(BUILD))/bench bench/compare-etcd-cluster.sh

bench-tools: all $(BENCH_TOOLS)

# bench-failover: kill -9 the leader of the oracle group and of a
# three-member etcd 3.4, time to the first good answer (bench/failover.sh;
# FAILOVER_ROUNDS, default 10; about 1.5 minutes; installs etcd-server).
bench-failover: bench-tools
	PERCOLATOR_BIN_DIR=$(abspath $(BINDIR)) BENCH_BIN_DIR=$(abspath $(BUILD))/bench bench/failover.sh

# bench-catchup: a follower of a three-member service group wiped under
# writes, time until it is a voter and ready again, then the other
# follower killed (bench/catchup.sh; CATCHUP_ROUNDS, CATCHUP_WARM; ~1 min a round).
bench-catchup: bench-tools
	PERCOLATOR_BIN_DIR=$(abspath $(BINDIR)) BENCH_BIN_DIR=$(abspath $(BUILD))/bench bench/catchup.sh

# bench-watch: the change feed under load: watchers of one prefix while
# writers put keys under it (bench/watch.sh; WATCH_ROWS, WATCH_SECONDS).
bench-watch: bench-tools
	PERCOLATOR_BIN_DIR=$(abspath $(BINDIR)) BENCH_BIN_DIR=$(abspath $(BUILD))/bench bash bench/watch.sh

# bench-leases: puts with and without a lease, keep-alives, a revoke.
bench-leases: bench-tools
	PERCOLATOR_BIN_DIR=$(abspath $(BINDIR)) BENCH_BIN_DIR=$(abspath $(BUILD))/bench bash bench/leases.sh

# bench-soak: three service members over three oracle members under mixed
# load (writes, point reads, 2-key transactions at once) for SOAK_SECONDS
# (default 600), p99 per SOAK_WINDOW (10 s) window printed and drawn
# (bench/soak.sh; installs gnuplot-nox). Not part of CI: it takes minutes.
bench-soak: bench-tools
	PERCOLATOR_BIN_DIR=$(abspath $(BINDIR)) BENCH_BIN_DIR=$(abspath $(BUILD))/bench bash bench/soak.sh

# bench-regions: 2-key transactions within one region and across two, on
# one service (bench/regions.sh; REGIONS_CONNS, REGIONS_RUNS).
bench-regions: bench-tools
	PERCOLATOR_BIN_DIR=$(abspath $(BINDIR)) BENCH_BIN_DIR=$(abspath $(BUILD))/bench bash bench/regions.sh

# bench-regions-group: the same on a three-member group with --region-logs
# (each region a Raft group of its own) and three oracles (REGIONS_COUNT).
bench-regions-group: bench-tools
	REGIONS_GROUP=1 PERCOLATOR_BIN_DIR=$(abspath $(BINDIR)) BENCH_BIN_DIR=$(abspath $(BUILD))/bench bash bench/regions.sh

# bench-pd: the placement driver (an oracle group) under 1,000 simulated
# nodes reporting 100 regions each: CPU, memory, heartbeat latency
# (bench/pd.sh; PD_* variables; about 2 minutes).
bench-pd: bench-tools
	PERCOLATOR_BIN_DIR=$(abspath $(BINDIR)) BENCH_BIN_DIR=$(abspath $(BUILD))/bench bash bench/pd.sh

# bench-groups: what K three-member Raft groups cost one process
# (threads, descriptors, memory, disk, AIO contexts, idle CPU), the
# measure of DESIGN §6.5's steps (GROUPS_K, default "5 20 50"), for each
# of GROUPS_ARMS: own (every member on a loop of its own with 8 MiB
# segments: the programs today), shared (three shared loops, 1 MiB
# segments: step 1), net (and a node network a loop: step 2), tls (the
# same with peer TLS between the nodes). About three minutes an arm;
# K=100 of own takes 7 GiB of /tmp.
GROUPS_K ?= 5 20 50
GROUPS_ARMS ?= own shared net
bench-groups: $(BUILD)/bench/groups_bench
	@for a in $(GROUPS_ARMS); do for k in $(GROUPS_K); do \
	    case $$a in own) o="--loops 0";; shared) o="--loops 3 --segment-kib 1024";; \
	        net) o="--loops 3 --segment-kib 1024 --net";; \
	        tls) o="--loops 3 --segment-kib 1024 --net --tls";; *) echo "unknown arm $$a"; exit 2;; esac; \
	    $(BUILD)/bench/groups_bench --groups $$k --seconds 10 $$o 2> $(BUILD)/bench/groups_bench.log || \
	        { cat $(BUILD)/bench/groups_bench.log; exit 1; }; echo; done; done

# bench-oracle: timestamps/s from a fresh oracle (BENCH_SECONDS per row, default 3).
bench-oracle: $(BINDIR)/percolator-oracle $(BUILD)/bench/bench_oracle
	PERCOLATOR_BIN_DIR=$(abspath $(BINDIR)) $(BUILD)/bench/bench_oracle

# api-check: the OpenAPI documents (api-spec/service.yaml, oracle.yaml) are
# those split.mjs makes from percolator.yaml (else: stale, run
# `node api-spec/split.mjs`); lint them (redocly, recommended rules);
# self-test the exchange validator; validate the HTTP exchanges the
# integration tests recorded; send the README tour and the recorded requests
# through Prism (api-spec/prism-check.sh: real programs from $(BINDIR),
# Prism as a validating proxy in front of each, 0 violations). No exchanges
# at all is a failure (the tests recorded nothing). Call it as a sub-make
# ($(MAKE) api-check) after the tests, so the wildcard sees the files they
# wrote.
API_EXCHANGES ?= $(wildcard build/plain/exchanges/*.jsonl build/asan/exchanges/*.jsonl)

.PHONY: api-check
api-check: $(PROGS)
	@command -v npm >/dev/null 2>&1 || { echo "api-check: npm not found; install Node.js 20 and npm"; exit 1; }
	@if [ ! -d api-spec/node_modules ] || [ api-spec/package-lock.json -nt api-spec/node_modules/.package-lock.json ]; then \
	  echo "api-check: api-spec/node_modules missing or older than package-lock.json, running npm ci"; \
	  cd api-spec && npm ci --no-audit --no-fund || exit 1; \
	fi
	node api-spec/split.mjs --check
	cd api-spec && REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true npx --no redocly lint service.yaml oracle.yaml
	sh api-spec/selftest.sh
	node api-spec/validate.mjs $(API_EXCHANGES)
	PERCOLATOR_BIN_DIR=$(abspath $(BINDIR)) bash api-spec/prism-check.sh $(API_EXCHANGES)

# docker-test: build docker/Dockerfile with podman (--no-cache), run
# docker/compose.yml, docker/compose.raft.yml and docker/compose.cluster.yml,
# commit, restart, read back, leader kills, health, down (docker/test.sh);
# then the same image and compose files with Docker Engine and Compose v1
# (docker/test-engine.sh).
.PHONY: docker-test
docker-test:
	bash docker/test.sh
	bash docker/test-engine.sh

# Optional: the container image's build copies only the programs' sources.
-include fuzz/fuzz.mk

clean:
	rm -rf build bin

-include $(shell find build -name '*.d' 2>/dev/null)
