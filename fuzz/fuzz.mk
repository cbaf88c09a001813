# fuzz/fuzz.mk — the libFuzzer harnesses (included by the Makefile; see
# fuzz/README).
#
#   make fuzz                        every harness, FUZZ_SECONDS (default 20) each
#   make fuzz FUZZ_TARGETS="keys"    only those
#   make fuzz-build                  build them, run nothing
#
# clang (Debian's clang 14 with its libFuzzer runtime) compiles each
# harness and the sources it tests afresh into build/fuzz, with coverage,
# ASan and UBSan; the gcc-built library is not used.

FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 20
FUZZ_DIR      = build/fuzz
FUZZ_ALL      = base64 utf8 percent records keys hwm flags writes batch raft_frame lease_keys pd region_call
FUZZ_TARGETS ?= $(FUZZ_ALL)
FUZZ_SAN      = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_CFLAGS   = -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -g -O1 -pthread -MMD -MP \
                $(FUZZ_SAN) -fsanitize=fuzzer-no-link
FUZZ_LIBS     = -lmicrohttpd -lgnutls -ljansson -lraft
INC_fuzz      = -Icommon -Iengine -Ioracle -Iservice

# What each harness compiles besides itself; common/ comes as one archive
# (the linker takes the files a harness needs: httpd*.c for the codec and the
# parsers, which answer errors through them, and what those use).
FUZZ_SRC_base64   =
FUZZ_SRC_utf8     = service/codec.c
FUZZ_SRC_percent  =
FUZZ_SRC_records  = engine/records.c
FUZZ_SRC_batch    = engine/batch.c engine/records.c engine/batch_changes.c engine/batch_keys.c \
                    engine/keys.c engine/region_codec.c
FUZZ_SRC_keys     = engine/keys.c
FUZZ_SRC_hwm      = oracle/hwm.c
FUZZ_SRC_flags    =
FUZZ_SRC_raft_frame =
FUZZ_SRC_writes   = service/writes.c service/codec.c service/body.c
FUZZ_SRC_lease_keys = service/lease_keys.c
FUZZ_SRC_pd       = oracle/pd_map.c
FUZZ_SRC_region_call = service/region_call_wire.c service/codec.c
FUZZ_COMMON       = $(FUZZ_DIR)/libcommon.a

$(FUZZ_DIR)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(INC_$(firstword $(subst /, ,$<))) -c $< -o $@

$(FUZZ_COMMON): $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(wildcard common/*.c))
	rm -f $@ && ar rcs $@ $^

define FUZZ_RULE
$(FUZZ_DIR)/fuzz_$(1): $(FUZZ_DIR)/obj/fuzz/fuzz_$(1).o $(patsubst %.c,$(FUZZ_DIR)/obj/%.o,$(FUZZ_SRC_$(1))) $(FUZZ_COMMON)
	$$(FUZZ_CC) -fsanitize=fuzzer $$(FUZZ_SAN) -pthread $$^ $$(FUZZ_LIBS) -o $$@
endef
$(foreach t,$(FUZZ_ALL),$(eval $(call FUZZ_RULE,$(t))))

.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_TARGETS:%=$(FUZZ_DIR)/fuzz_%)

# Each harness starts from its committed seeds (fuzz/corpus/<target>, read
# only) plus a fresh scratch corpus in build/fuzz that takes what it finds.
fuzz: deps fuzz-build
	FUZZ_SECONDS=$(FUZZ_SECONDS) fuzz/run.sh $(FUZZ_DIR) $(FUZZ_TARGETS)
