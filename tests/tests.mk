# Tests: `make test` builds everything, then runs tests/run.sh.
TEST_BIN := $(B)/tests
LIB_CORE_OBJ := $(filter-out $(B)/lib/intercept/dlsym.o,$(LIB_OBJ))
DOORS := linked dlsym procaddr

RECORDER_TESTS := $(TEST_BIN)/test_recorder $(TEST_BIN)/test_recorder_ring $(TEST_BIN)/test_lock
$(RECORDER_TESTS): $(TEST_BIN)/%: tests/unit/%.c tests/unit/recorder_setup.c tests/unit/recorder_setup.h $(LIB_CORE_OBJ)
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -Ilib $(CFLAGS) $(WARN) -pthread -o $@ $(filter-out %.h,$^) -lcmocka -lunwind -lzstd -ldl

$(TEST_BIN)/door_linked: tests/doors/door_linked.c tests/doors/scenario.h $(B)/fake/libcuda.so.1
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -O1 -g -rdynamic -o $@ $< -L$(B)/fake -lcuda

$(TEST_BIN)/door_%: tests/doors/door_%.c tests/doors/scenario.h
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -O1 -g -rdynamic -o $@ $< -ldl

TEST_PROGS := $(RECORDER_TESTS) $(DOORS:%=$(TEST_BIN)/door_%)


$(TEST_BIN)/fakecuda_smoke: $(wildcard tests/fakecuda_smoke/*.c) tests/fakecuda_smoke/smoke.h
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -O1 -g $(WARN) -o $@ $(filter %.c,$^) -ldl -lpthread
TEST_PROGS += $(TEST_BIN)/fakecuda_smoke

READ_LIB_OBJ := $(filter-out $(B)/tools/oomtrace-read.o,$(READ_OBJ))
$(TEST_BIN)/test_doors: tests/e2e/test_doors.c tests/e2e/harness.c tests/e2e/harness.h $(READ_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) $(READ_CPPFLAGS) -Itools/read $(CFLAGS) $(WARN) -o $@ tests/e2e/test_doors.c tests/e2e/harness.c \
		$(READ_LIB_OBJ) -lcmocka -lzstd $(READ_LIBS) -lm
TEST_PROGS += $(TEST_BIN)/test_doors

# A library whose own thread allocates (tests/py/borrow_native.py loads it with ctypes).
$(TEST_BIN)/libnative_thread.so: tests/doors/native_thread.c $(B)/fake/libcuda.so.1
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -O1 -g $(WARN) -fPIC -shared -pthread -o $@ $< -L$(B)/fake -lcuda
$(TEST_BIN)/test_doors: $(TEST_BIN)/libnative_thread.so
TEST_PROGS += $(TEST_BIN)/libnative_thread.so

# Every allocation family and every interposer pitfall (tests/doors/families.c, pitfalls*.c). The programs
# reach the driver only through dlopen/dlsym/cuGetProcAddress, like cudart; libpitfall.so is a library the
# pitfall program dlopens RTLD_LOCAL, to look symbols up from a caller that is not in the global scope.
$(TEST_BIN)/families: tests/doors/families.c tests/doors/drv.c tests/doors/drv.h include/oomtrace.h
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -O1 -g $(WARN) -rdynamic -o $@ $(filter %.c,$^) -ldl

# A context's end frees what was made in it (tests/doors/contexts.c, checked by tests/e2e/test_contexts.c).
$(TEST_BIN)/contexts: tests/doors/contexts.c tests/doors/drv.c tests/doors/drv.h include/oomtrace.h
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -O1 -g $(WARN) -rdynamic -o $@ $(filter %.c,$^) -ldl
$(TEST_BIN)/test_contexts: $(TEST_BIN)/contexts
TEST_PROGS += $(TEST_BIN)/contexts $(TEST_BIN)/test_contexts

$(TEST_BIN)/libpitfall.so: tests/doors/pitfall_lib.c
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -O1 -g $(WARN) -fPIC -shared -o $@ $< -ldl

$(TEST_BIN)/pitfalls: $(wildcard tests/doors/pitfalls*.c) tests/doors/drv.c tests/doors/pitfalls.h tests/doors/drv.h \
		include/oomtrace.h $(TEST_BIN)/libpitfall.so
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -O1 -g $(WARN) -rdynamic -pthread -o $@ $(filter %.c,$^) -ldl

$(TEST_BIN)/test_%: tests/e2e/test_%.c tests/e2e/harness.c tests/e2e/harness.h $(READ_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) $(READ_CPPFLAGS) -Itools/read $(CFLAGS) $(WARN) -o $@ $< tests/e2e/harness.c \
		$(READ_LIB_OBJ) -lcmocka -lzstd $(READ_LIBS) -lm
$(TEST_BIN)/test_families: $(TEST_BIN)/families
$(TEST_BIN)/test_pitfalls: $(TEST_BIN)/pitfalls
TEST_PROGS += $(TEST_BIN)/families $(TEST_BIN)/pitfalls $(TEST_BIN)/libpitfall.so
TEST_PROGS += $(TEST_BIN)/test_families $(TEST_BIN)/test_pitfalls

$(TEST_BIN)/crash_workload: tests/doors/crash_workload.c $(B)/fake/libcuda.so.1
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -O1 -g -o $@ $< -L$(B)/fake -lcuda
TEST_PROGS += $(TEST_BIN)/crash_workload

$(TEST_BIN)/test_crash: $(TEST_BIN)/crash_workload
TEST_PROGS += $(TEST_BIN)/test_crash

$(TEST_BIN)/libfault.so: tests/faults/libfault.c
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CFLAGS) $(WARN) -fPIC -shared -fvisibility=hidden -o $@ $< -ldl

$(TEST_BIN)/plant: tests/doors/plant.c tests/doors/scenario.h $(B)/fake/libcuda.so.1
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -O1 -g -rdynamic -o $@ $< -L$(B)/fake -lcuda
$(TEST_BIN)/test_faults: $(TEST_BIN)/libfault.so $(TEST_BIN)/plant $(TEST_BIN)/door_linked
TEST_PROGS += $(TEST_BIN)/libfault.so $(TEST_BIN)/plant $(TEST_BIN)/test_faults

$(TEST_BIN)/stress: tests/doors/stress.c include/oomtrace.h $(B)/fake/libcuda.so.1
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -O1 -g -pthread -o $@ $< -L$(B)/fake -lcuda
$(TEST_BIN)/test_stress: $(TEST_BIN)/stress
TEST_PROGS += $(TEST_BIN)/stress $(TEST_BIN)/test_stress

$(TEST_BIN)/fork_workload: tests/doors/fork_workload.c $(B)/fake/libcuda.so.1
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -O1 -g -pthread -o $@ $< -L$(B)/fake -lcuda
$(TEST_BIN)/test_procs: $(TEST_BIN)/fork_workload $(TEST_BIN)/door_linked
TEST_PROGS += $(TEST_BIN)/fork_workload $(TEST_BIN)/test_procs

# Hostile hosts (issue 15): cancellation, fork storms, inherited signal dispositions, small stacks, fd 2.
$(TEST_BIN)/libctor_exec.so: tests/doors/ctor_exec.c
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) -O1 -g $(WARN) -fPIC -shared -o $@ $<
# --no-as-needed: hostile uses no symbol of libctor_exec.so; it is there for its constructor.
$(TEST_BIN)/hostile: tests/doors/hostile.c tests/doors/hostile_proc.c tests/doors/hostile.h $(B)/fake/libcuda.so.1 \
		$(TEST_BIN)/libctor_exec.so
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -O1 -g $(WARN) -pthread -rdynamic -o $@ $(filter %.c,$^) -L$(B)/fake -lcuda -ldl \
		-Wl,--no-as-needed -L$(TEST_BIN) -lctor_exec -Wl,--as-needed -Wl,-rpath,'$$ORIGIN'
$(TEST_BIN)/test_hostile: $(TEST_BIN)/hostile
TEST_PROGS += $(TEST_BIN)/libctor_exec.so $(TEST_BIN)/hostile $(TEST_BIN)/test_hostile
# A plugin that allocates and is then unloaded (hostile dlclosed, tests/sh/snapshot_files.sh).
$(TEST_BIN)/libplugin_alloc.so: tests/doors/plugin_alloc.c $(B)/fake/libcuda.so.1
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -O1 -g $(WARN) -fPIC -shared -o $@ $< -L$(B)/fake -lcuda
# The same plugin under another name: a second library unloaded (hostile dlclosed PLUGIN FIRST).
$(TEST_BIN)/libplugin_idle.so: tests/doors/plugin_alloc.c $(B)/fake/libcuda.so.1
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -O1 -g $(WARN) -fPIC -shared -o $@ $< -L$(B)/fake -lcuda
TEST_PROGS += $(TEST_BIN)/libplugin_alloc.so $(TEST_BIN)/libplugin_idle.so

# Synthetic and damaged snapshots (tests/snapgen): used by tests/sh/malformed.sh and report_formats.sh.
# snapgen is every C file of tests/snapgen but bombs.c (bench.mk and fuzz.mk build it from the same list).
SNAPGEN_SRC := $(filter-out tests/snapgen/bombs.c,$(wildcard tests/snapgen/*.c))
SNAPGEN_DEP := $(SNAPGEN_SRC) tests/snapgen/snapgen.h include/oomtrace_format.h
$(B)/snapgen: $(SNAPGEN_DEP)
	$(DEPS) $(CC) -O2 -g -Iinclude $(WARN) -o $@ $(SNAPGEN_SRC) -lzstd
TEST_PROGS += $(B)/snapgen
# Small files that claim huge or quadratic work (issue 15): tests/sh/hostile_files.sh.
$(B)/bombs: tests/snapgen/bombs.c include/oomtrace_format.h
	$(DEPS) $(CC) -O2 -g -Iinclude $(WARN) -o $@ $< -lzstd
TEST_PROGS += $(B)/bombs

# It needs libm.so.6, which the test programs do not load, as the real one needs pieces of the C library that a
# program may not have loaded: the tracer's load of NVML leaves them out of the snapshots' modules too
# (test_hostile's test_nvml_kept_unlisted).
$(B)/fake/libnvidia-ml.so.1: tests/fakenvml/fakenvml.c
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CFLAGS) $(WARN) -fPIC -shared -fvisibility=hidden -Wl,-soname,libnvidia-ml.so.1 -o $@ $< -ldl \
		-Wl,--no-as-needed -lm -Wl,--as-needed
TEST_PROGS += $(B)/fake/libnvidia-ml.so.1

# Golden-file tests of the reader (tests/sh/golden.sh runs tests/golden/run.sh): a workload with exact sizes,
# built -g so that reports show file:line. `make golden-update` rewrites the expected files.
$(TEST_BIN)/golden_workload: tests/golden/workload.c include/oomtrace.h $(B)/fake/libcuda.so.1
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -O1 -g $(WARN) -rdynamic -o $@ $< -L$(B)/fake -lcuda -ldl
TEST_PROGS += $(TEST_BIN)/golden_workload
# Call sites that reach the allocation through one helper (tests/golden/helper.c), for the same tests.
$(TEST_BIN)/golden_helper: tests/golden/helper.c $(B)/fake/libcuda.so.1
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -O1 -g $(WARN) -o $@ $< -L$(B)/fake -lcuda
TEST_PROGS += $(TEST_BIN)/golden_helper
# A cache that only grows, a leak beside freed scratch or between markers, a request larger than the device, a
# pool's idle memory, a plain request short of the free memory (tests/golden/cache.c).
$(TEST_BIN)/golden_cache: tests/golden/cache.c include/oomtrace.h $(B)/fake/libcuda.so.1
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -O1 -g $(WARN) -o $@ $< -L$(B)/fake -lcuda -ldl
TEST_PROGS += $(TEST_BIN)/golden_cache
# Unit tests of the reader's gates, size parsing, stack views and site filters (the pattern rule above builds it).
TEST_PROGS += $(TEST_BIN)/test_readmodes
# Unit tests of the walk over a stack's frames (analyze/stackview.h), built in memory.
TEST_PROGS += $(TEST_BIN)/test_framewalk

# A CUDA runtime program (static cudart from the toolkit), for tests/sh/fakecuda_runtime.sh: the stand-in
# driver must refuse it in one line, never crash it. Built only where the toolkit has libcudart_static.a.
CUDART_STATIC := $(wildcard $(CUDA_HOME)/lib64/libcudart_static.a)
ifneq ($(CUDART_STATIC),)
$(TEST_BIN)/cudart_program: tests/doors/cudart_program.c
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -O1 -g -o $@ $< $(CUDART_STATIC) -ldl -lpthread -lrt
TEST_PROGS += $(TEST_BIN)/cudart_program
endif

# walk_lib_a.so and walk_lib_b.so: one library's two builds (tests/unit/walk_lib.S), loaded one after the
# other at the same place by test_walk's unload case; test_walk finds them beside itself.
$(TEST_BIN)/walk_lib_a.so: tests/unit/walk_lib.S
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) -shared -nostdlib -DFRAME=0x88 -o $@ $<
$(TEST_BIN)/walk_lib_b.so: tests/unit/walk_lib.S
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) -shared -nostdlib -DFRAME=0x108 -o $@ $<

$(TEST_BIN)/test_walk: tests/unit/test_walk.c tests/unit/walk_hops.S $(LIB_CORE_OBJ) | $(TEST_BIN)/walk_lib_a.so $(TEST_BIN)/walk_lib_b.so
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -Ilib $(CFLAGS) $(WARN) -fno-optimize-sibling-calls -pthread -o $@ $^ -lcmocka -lunwind -lzstd -ldl
TEST_PROGS += $(TEST_BIN)/test_walk

$(TEST_BIN)/test_unmaps: tests/unit/test_unmaps.c $(LIB_CORE_OBJ)
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -Ilib $(CFLAGS) $(WARN) -pthread -o $@ $^ -lcmocka -lunwind -lzstd -ldl
TEST_PROGS += $(TEST_BIN)/test_unmaps

$(TEST_BIN)/test_tables: tests/unit/test_tables.c $(LIB_CORE_OBJ)
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -Ilib $(CFLAGS) $(WARN) -pthread -o $@ $(filter-out %.h,$^) -lcmocka -lunwind -lzstd -ldl
TEST_PROGS += $(TEST_BIN)/test_tables

.PHONY: golden-update
golden-update: test-build
	@tests/golden/update.sh

.PHONY: test-build
test-build: all $(TEST_PROGS)

test:
	@tools/deps.sh --test
	@$(MAKE) --no-print-directory test-build
	@tests/run.sh

