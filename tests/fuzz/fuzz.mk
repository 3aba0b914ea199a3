# Fuzzing and sanitizer runs; included by the top Makefile.
#   make fuzz          build the libFuzzer target and fuzz for FUZZ_TIME seconds (default 60) from the
#                      seed corpus; new inputs go to $(B)/fuzz/corpus, crashes to $(B)/fuzz/artifacts
#   make fuzz-corpus   every seed and regression input once, then FUZZ_RUNS (20000) mutations from
#                      seed 1: what CI runs (tests/sh/fuzz_corpus.sh)
#   make sanitize      library, reader, tests with ASan+UBSan in $(B)/asan; the test suite under them
#   make tsan          library and reader with TSan in $(B)/tsan; the threaded tests under them
# A crash that has been fixed belongs in tests/fuzz/regressions/ (fuzz-corpus replays it forever).
# tests/fuzz/make_corpus.sh regenerates the seeds.

ifeq ($(origin FUZZ_CC),undefined)
FUZZ_CC := $(shell command -v clang || command -v clang-14)
endif
FUZZ_B := $(B)/fuzz
FUZZ_BIN := $(FUZZ_B)/fuzz_snapshot
FUZZ_TIME ?= 60
FUZZ_RUNS ?= 20000
FUZZ_DIRS := tests/fuzz/corpus tests/fuzz/regressions
# -close_fd_mask=2: the folded and memviz renderers write notes to stderr, one or two per input; crash
# reports still come through. Run the target on a saved input without it to see everything.
# -timeout: an input normally takes milliseconds; one that takes seconds is a bug worth an artifact.
# -rss_limit_mb: the reader's memory budget (128 x the input + 32 MiB, model/snapshot.h) keeps an input of
# libFuzzer's sizes far below this, sanitizer shadow included; an input that amplifies past it is a bug.
FUZZ_ARGS := -artifact_prefix=$(FUZZ_B)/artifacts/ -dict=tests/fuzz/snapshot.dict -close_fd_mask=2 -timeout=30 \
	-rss_limit_mb=1024 -malloc_limit_mb=512
READ_CORE_SRC := $(filter-out tools/oomtrace-read.c,$(READ_SRC))

# tests/fuzz/ubsan.ignore lists open findings, with their reproducers.
FUZZ_SRC := tests/fuzz/fuzz_snapshot.c tests/fuzz/fuzz_checks.c
$(FUZZ_BIN): $(FUZZ_SRC) tests/fuzz/fuzz_checks.h $(READ_CORE_SRC) $(READ_HDR) include/oomtrace_format.h \
		tests/fuzz/ubsan.ignore
	@mkdir -p $(dir $@)
	$(DEPS) $(FUZZ_CC) $(CPPFLAGS) $(READ_CPPFLAGS) -Itools/read -g -O1 -fno-omit-frame-pointer \
		-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
		-fsanitize-ignorelist=tests/fuzz/ubsan.ignore $(WARN) -o $@ $(FUZZ_SRC) $(READ_CORE_SRC) \
		-lzstd $(READ_LIBS) -lm -pthread

$(FUZZ_B)/snapgen: $(SNAPGEN_DEP)
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) -Iinclude -O2 -o $@ $(SNAPGEN_SRC) -lzstd

.PHONY: fuzz fuzz-corpus sanitize tsan
fuzz: $(FUZZ_BIN)
	@mkdir -p $(FUZZ_B)/corpus $(FUZZ_B)/artifacts
	$(FUZZ_BIN) $(FUZZ_ARGS) -max_total_time=$(FUZZ_TIME) -print_final_stats=1 $(FUZZ_B)/corpus $(FUZZ_DIRS)

# The mutation run writes into a scratch corpus, never into tests/fuzz; with one seed and one process its
# inputs are the same on every run.
fuzz-corpus: $(FUZZ_BIN)
	@mkdir -p $(FUZZ_B)/artifacts
	$(FUZZ_BIN) $(FUZZ_ARGS) $(wildcard $(addsuffix /*,$(FUZZ_DIRS)))
	@rm -rf $(FUZZ_B)/ci-corpus && mkdir -p $(FUZZ_B)/ci-corpus
	$(FUZZ_BIN) $(FUZZ_ARGS) -runs=$(FUZZ_RUNS) -seed=1 -print_final_stats=1 $(FUZZ_B)/ci-corpus $(FUZZ_DIRS)

# ---- sanitizers ----
# Each is a second build of the whole tree through the top Makefile, with the sanitizer in CC so that it
# reaches the link of liboomtrace.so too (that link line takes no CFLAGS).
#
# ASan: clang's runtime is linked as a shared library (-shared-libsan), because liboomtrace.so is linked
# -Wl,--no-undefined and is preloaded into programs that do not carry a runtime of their own; gcc does
# that by default. SAN_CC=gcc works as well.
SAN_CC ?= $(or $(FUZZ_CC),gcc)
ASAN_B := $(B)/asan
ifneq ($(findstring clang,$(notdir $(SAN_CC))),)
ASAN_RT = $(shell $(SAN_CC) -print-file-name=libclang_rt.asan-x86_64.so)
ASAN_LINK = -shared-libsan -Wl,-rpath,$(dir $(ASAN_RT)) -Wno-unused-command-line-argument
else
ASAN_RT = $(shell $(SAN_CC) -print-file-name=libasan.so)
ASAN_LINK =
endif
ASAN_FLAGS := -fsanitize=address,undefined -fno-sanitize-recover=all

# TSan: gcc, whose libtsan.so can be preloaded; clang 14's shared TSan runtime crashes at start-up here
# (even in an empty program), and its static one cannot reach python3 or the door programs.
# route.o and real.o stay uninstrumented: liboomtrace.so exports dlsym, so the TSan runtime's first dlsym
# call, made while it initializes, lands in lib/intercept/route.c and lib/driver/real.c (the real dlsym)
# before TSan can run instrumented code. So do sigaction.o and sigchain.o: it exports sigaction too, which
# the TSan runtime calls while it initializes, to install its handlers for deadly signals.
TSAN_CC ?= gcc
TSAN_B := $(B)/tsan
TSAN_RT = $(shell $(TSAN_CC) -print-file-name=libtsan.so)
SAN_CFLAGS := -O1 -g -fno-omit-frame-pointer

$(ASAN_B)/cmocka_skip.so $(TSAN_B)/cmocka_skip.so: tests/fuzz/cmocka_skip.c
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) -O1 -g $(WARN) -fPIC -shared -o $@ $< -ldl

$(TSAN_B)/tsan_unwind.so: tests/fuzz/tsan_unwind.c
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) -O1 -g $(WARN) -fPIC -shared -o $@ $< -ldl

sanitize: test-build $(FUZZ_B)/snapgen $(ASAN_B)/cmocka_skip.so
	$(MAKE) --no-print-directory PGO=0 LIB_FLAGS_TRACK=0 B=$(ASAN_B) CC="$(SAN_CC) $(ASAN_FLAGS) $(ASAN_LINK)" CFLAGS="$(SAN_CFLAGS)" test-build
	SNAPGEN=$(FUZZ_B)/snapgen tests/fuzz/sanitize.sh asan $(ASAN_B) $(ASAN_RT)

tsan: test-build $(FUZZ_B)/snapgen $(TSAN_B)/cmocka_skip.so $(TSAN_B)/tsan_unwind.so
	rm -f $(TSAN_B)/lib/intercept/route.o $(TSAN_B)/lib/driver/real.o $(TSAN_B)/lib/intercept/sigaction.o \
		$(TSAN_B)/lib/runtime/sigchain.o
	$(MAKE) --no-print-directory PGO=0 LIB_FLAGS_TRACK=0 B=$(TSAN_B) CC="$(TSAN_CC)" CFLAGS="$(SAN_CFLAGS)" $(TSAN_B)/lib/intercept/route.o \
		$(TSAN_B)/lib/driver/real.o $(TSAN_B)/lib/intercept/sigaction.o $(TSAN_B)/lib/runtime/sigchain.o
	$(MAKE) --no-print-directory PGO=0 LIB_FLAGS_TRACK=0 B=$(TSAN_B) CC="$(TSAN_CC) -fsanitize=thread" CFLAGS="$(SAN_CFLAGS)" \
		$(TSAN_B)/liboomtrace.so $(TSAN_B)/tests/test_recorder $(TSAN_B)/tests/test_recorder_ring $(TSAN_B)/tests/test_lock \
		$(TSAN_B)/oomtrace-read
	SNAPGEN=$(FUZZ_B)/snapgen tests/fuzz/sanitize.sh tsan $(TSAN_B) $(TSAN_RT)
