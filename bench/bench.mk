# Benchmarks: `make bench` builds into build/bench/ and runs bench/run.sh (about 2 minutes; prints a
# table and writes build/bench/results.md). `make bench-build` only builds. No timing is asserted.
BENCH_BIN := $(B)/bench
# Frames must be real: no sibling calls, so every recursion level keeps its frame.
BENCH_CFLAGS := -O2 -g -fno-optimize-sibling-calls -fno-inline-functions-called-once
BENCH_PROGS := $(BENCH_BIN)/alloc_cost $(BENCH_BIN)/steady $(BENCH_BIN)/bigsnap $(BENCH_BIN)/snapinfo

$(BENCH_BIN)/alloc_cost: bench/alloc_cost.c include/oomtrace.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(BENCH_CFLAGS) $(WARN) -pthread -o $@ $< -ldl -lunwind

$(BENCH_BIN)/steady: bench/steady.c include/oomtrace.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(BENCH_CFLAGS) $(WARN) -o $@ $< -ldl

$(BENCH_BIN)/bigsnap: bench/bigsnap.c bench/snapfile.h include/oomtrace.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(BENCH_CFLAGS) $(WARN) -o $@ $< -ldl -lzstd

$(BENCH_BIN)/snapinfo: bench/snapinfo.c bench/snapfile.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(BENCH_CFLAGS) $(WARN) -o $@ $< -lzstd

# The reader's inputs come from tests/snapgen/snapgen.c when it is there (synthetic snapshots), and from
# the tracer itself (bench/bigsnap) in every case.
SNAPGEN_SRC := $(wildcard tests/snapgen/snapgen.c)
ifneq ($(SNAPGEN_SRC),)
BENCH_PROGS += $(BENCH_BIN)/snapgen
$(BENCH_BIN)/snapgen: $(SNAPGEN_SRC) include/oomtrace_format.h
	@mkdir -p $(dir $@)
	$(CC) -Iinclude -O2 -o $@ $< -lzstd
endif

.PHONY: bench-build
bench-build: $(B)/liboomtrace.so $(B)/oomtrace-read $(B)/fake/libcuda.so.1 $(BENCH_PROGS)

bench: bench-build
	@MAKE="$(MAKE)" bench/run.sh --built
