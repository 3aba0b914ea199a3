# Benchmarks: `make bench` builds into build/bench/ and runs bench/run.sh (about 2 minutes; prints a
# table and writes build/bench/results.md). `make bench-build` only builds. No timing is asserted.
BENCH_BIN := $(B)/bench
# Frames must be real: no sibling calls, so every recursion level keeps its frame.
BENCH_CFLAGS := -O2 -g -fno-optimize-sibling-calls -fno-inline-functions-called-once
BENCH_PROGS := $(BENCH_BIN)/alloc_cost $(BENCH_BIN)/steady $(BENCH_BIN)/bigsnap $(BENCH_BIN)/snapinfo

$(BENCH_BIN)/alloc_cost: bench/alloc_cost.c include/oomtrace.h
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) $(BENCH_CFLAGS) $(WARN) -pthread -o $@ $< -ldl -lunwind

$(BENCH_BIN)/steady: bench/steady.c include/oomtrace.h
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) $(BENCH_CFLAGS) $(WARN) -o $@ $< -ldl

$(BENCH_BIN)/bigsnap: bench/bigsnap.c bench/snapfile.h include/oomtrace.h
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) $(BENCH_CFLAGS) $(WARN) -o $@ $< -ldl -lzstd

$(BENCH_BIN)/snapinfo: bench/snapinfo.c bench/snapfile.h
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) $(BENCH_CFLAGS) $(WARN) -o $@ $< -lzstd

# The reader's inputs come from tests/snapgen when it is there (synthetic snapshots; SNAPGEN_SRC, from
# tests/tests.mk), and from the tracer itself (bench/bigsnap) in every case.
ifneq ($(wildcard tests/snapgen/snapgen.c),)
BENCH_PROGS += $(BENCH_BIN)/snapgen
$(BENCH_BIN)/snapgen: $(SNAPGEN_DEP)
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) -Iinclude -O2 -o $@ $(SNAPGEN_SRC) -lzstd
endif

# alloc_objects: allocation pairs with N extra shared objects loaded and the stack passing through some
# of them. Each hop kind is one object copied 500 times: a copy is a distinct object to the loader.
HOP_COPIES := 500
HOP_KINDS := std nofde expr drap
BENCH_PROGS += $(BENCH_BIN)/alloc_objects $(BENCH_BIN)/hops/.stamp

# A library whose own thread allocates (bench/py_borrow.py): the cost of borrowing a waiting thread's
# Python stack.
$(BENCH_BIN)/libnative_thread.so: tests/doors/native_thread.c $(B)/fake/libcuda.so.1
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -O2 -g $(WARN) -fPIC -shared -pthread -o $@ $< -L$(B)/fake -lcuda
BENCH_PROGS += $(BENCH_BIN)/libnative_thread.so

$(BENCH_BIN)/alloc_objects: bench/alloc_objects.c
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) $(BENCH_CFLAGS) $(WARN) -o $@ $< -ldl -lunwind

$(BENCH_BIN)/hops/std.so: bench/hops/hop.c
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(BENCH_CFLAGS) -fPIC -shared -o $@ $<

$(BENCH_BIN)/hops/nofde.so: bench/hops/hop.c
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(BENCH_CFLAGS) -fPIC -shared -fno-asynchronous-unwind-tables -fno-unwind-tables \
		-fno-omit-frame-pointer -o $@ $<

# expr and drap: the frame shapes of tests/unit/walk_hops.S (a CFA expression; a realigned frame)
$(BENCH_BIN)/hops/expr.so $(BENCH_BIN)/hops/drap.so: tests/unit/walk_hops.S
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) -fPIC -shared -o $@ $<

$(BENCH_BIN)/hops/.stamp: $(foreach k,$(HOP_KINDS),$(BENCH_BIN)/hops/$(k).so)
	for k in $(HOP_KINDS); do mkdir -p $(BENCH_BIN)/hops/$$k; \
		for i in $$(seq -f %03g 0 $$(($(HOP_COPIES) - 1))); do cp $(BENCH_BIN)/hops/$$k.so $(BENCH_BIN)/hops/$$k/hop$$i.so; done; done
	touch $@

.PHONY: bench-build bench-reader-ab
bench-build: $(B)/liboomtrace.so $(B)/oomtrace-read $(B)/fake/libcuda.so.1 $(BENCH_PROGS)

bench: bench-build
	@MAKE="$(MAKE)" bench/run.sh --built
	@MAKE="$(MAKE)" bench/reader_ab.sh

# Issue 12's cost target alone: the text report of a 1M-allocation snapshot, this tree against the reader
# before issue 12's work, alternating (bench/reader_ab.sh).
bench-reader-ab: $(B)/oomtrace-read
	@MAKE="$(MAKE)" bench/reader_ab.sh


# A bench build of the library: $(1) its name (its objects under $(BENCH_BIN)/$(1)/, liboomtrace-$(1).so, its
# profile), $(2) the define that makes it. Profile-guided as the library is (Makefile: PGO), each from a profile
# of its own: the define changes the code. Same link line, so it runs wherever liboomtrace.so does. A change of
# this file's rules makes the objects again.
define bench_lib
$(BENCH_BIN)/$(1)/lib/%.o: lib/%.c $(LIB_HDR) include/oomtrace_format.h include/oomtrace.h $(LIB_FLAGS_DEP) \
		bench/bench.mk $(call pgo_dep,$(1))
	@mkdir -p $$(dir $$@)
	$$(DEPS) $$(CC) $$(CPPFLAGS) -D$(2) -Ilib $$(CFLAGS) $$(call pgo_use,$(1)) $$(WARN) -fPIC -fvisibility=hidden -pthread -c $$< -o $$@

$(BENCH_BIN)/liboomtrace-$(1).so: $(LIB_SRC:%.c=$(BENCH_BIN)/$(1)/%.o) $(LIB_ASM:%.S=$(B)/%.o) $(B)/lib/runtime/companion_src.o
	$$(DEPS) $$(CC) $$(LDFLAGS) -shared -o $$@ $$^ $$(LIB_LINK)
endef

# The stage build (lib/common/stage.h): the library with -DOT_STAGE_CYCLES, counting rdtsc cycles and calls
# per stage of the event path and each cache's hits, one line of JSON on stderr at exit. Bench only: the
# normal build compiles the counters to nothing.
STAGE_OBJ := $(LIB_SRC:%.c=$(BENCH_BIN)/stages/%.o) $(LIB_ASM:%.S=$(B)/%.o) $(B)/lib/runtime/companion_src.o
$(eval $(call bench_lib,stages,OT_STAGE_CYCLES))
# The pass-through build (lib/common/stage.h): the normal build's code and the stage build's switch between
# blocks traced and passed through, without its probes, which run in traced blocks only (~120 cycles each on the
# H200): what tests/gpu/bench_inproc.py times (--pass-lib).
$(eval $(call bench_lib,pass,OT_STAGE_PASS_ONLY))

.PHONY: bench-stages
bench-stages: $(BENCH_BIN)/liboomtrace-stages.so $(BENCH_BIN)/liboomtrace-pass.so $(B)/fake/libcuda.so.1

# bench/step_mix.py's native side: a step's allocations through PyTorch-like C chains, a backward thread.
$(BENCH_BIN)/libstepmix.so: bench/stepmix/stepmix.c $(B)/fake/libcuda.so.1
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) $(BENCH_CFLAGS) $(WARN) -fPIC -shared -pthread -o $@ $< -L$(B)/fake -lcuda -ldl
bench-build: $(BENCH_BIN)/libstepmix.so
# bench/vm_reads.c: a checked read's cost, buffers in one call against calls (issue 16's eighth pass)
$(BENCH_BIN)/vm_reads: bench/vm_reads.c
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) $(BENCH_CFLAGS) $(WARN) -o $@ $<
bench-build: $(BENCH_BIN)/vm_reads
# bench/cold_capture.c: a traced allocation after the step's own work evicted the tracer's lines (issue 16)
$(BENCH_BIN)/cold_capture: bench/cold_capture.c $(BENCH_BIN)/libstepmix.so
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) $(BENCH_CFLAGS) $(WARN) -o $@ $< -L$(BENCH_BIN) -lstepmix -L$(B)/fake -lcuda -Wl,-rpath,'$$ORIGIN'
bench-build: $(BENCH_BIN)/cold_capture

# The Python link (lib/capture/pyframes.c, OT_PY_LINK; docs/PERFORMANCE.md, issue 16's seventh pass): the
# library and its stage build with pyframes.c compiled with -DOT_PY_LINK, for a measurement beside the
# normal build (tests/gpu/bench_pair_parts.sh with LIB= and STAGES_LIB= naming these).
$(BENCH_BIN)/pylink/lib/%.o: lib/%.c $(LIB_HDR) include/oomtrace_format.h include/oomtrace.h
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -DOT_PY_LINK -Ilib $(CFLAGS) $(WARN) -fPIC -fvisibility=hidden -pthread -c $< -o $@
$(BENCH_BIN)/stages-pylink/lib/%.o: lib/%.c $(LIB_HDR) include/oomtrace_format.h include/oomtrace.h
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -DOT_PY_LINK -DOT_STAGE_CYCLES -Ilib $(CFLAGS) $(WARN) -fPIC -fvisibility=hidden -pthread -c $< -o $@
$(BENCH_BIN)/liboomtrace-pylink.so: $(filter-out $(B)/lib/capture/pyframes.o,$(LIB_OBJ)) $(BENCH_BIN)/pylink/lib/capture/pyframes.o
	$(DEPS) $(CC) $(LDFLAGS) -shared -o $@ $^ $(LIB_LINK)
$(BENCH_BIN)/liboomtrace-stages-pylink.so: $(filter-out $(BENCH_BIN)/stages/lib/capture/pyframes.o,$(STAGE_OBJ)) $(BENCH_BIN)/stages-pylink/lib/capture/pyframes.o
	$(DEPS) $(CC) $(LDFLAGS) -shared -o $@ $^ $(LIB_LINK)
.PHONY: bench-pylink
bench-pylink: $(BENCH_BIN)/liboomtrace-pylink.so $(BENCH_BIN)/liboomtrace-stages-pylink.so $(B)/fake/libcuda.so.1
# bench/lock_cost.c: one take and give of the recorder's lock, owned against shared (issue 16's nineteenth pass)
$(BENCH_BIN)/lock_cost: bench/lock_cost.c $(LIB_CORE_OBJ)
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -Ilib $(BENCH_CFLAGS) $(WARN) -pthread -o $@ $^ -lunwind -lzstd -ldl
bench-build: $(BENCH_BIN)/lock_cost
