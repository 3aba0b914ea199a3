# Tests: `make test` builds everything, then runs tests/run.sh.
TEST_BIN := $(B)/tests
LIB_CORE_OBJ := $(filter-out $(B)/lib/dlsym.o,$(LIB_OBJ))
DOORS := linked dlsym procaddr

$(TEST_BIN)/test_recorder: tests/unit/test_recorder.c $(LIB_CORE_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Ilib $(CFLAGS) $(WARN) -pthread -o $@ $^ -lcmocka -lunwind -lzstd -ldl

$(TEST_BIN)/door_linked: tests/doors/door_linked.c tests/doors/scenario.h $(B)/fake/libcuda.so.1
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -O1 -g -rdynamic -o $@ $< -L$(B)/fake -lcuda

$(TEST_BIN)/door_%: tests/doors/door_%.c tests/doors/scenario.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -O1 -g -rdynamic -o $@ $< -ldl

TEST_PROGS := $(TEST_BIN)/test_recorder $(DOORS:%=$(TEST_BIN)/door_%)


$(TEST_BIN)/fakecuda_smoke: tests/fakecuda_smoke.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -O1 -g -o $@ $< -ldl -lpthread
TEST_PROGS += $(TEST_BIN)/fakecuda_smoke

READ_LIB_OBJ := $(filter-out $(B)/tools/oomtrace-read.o,$(READ_OBJ))
$(TEST_BIN)/test_doors: tests/e2e/test_doors.c tests/e2e/harness.c tests/e2e/harness.h $(READ_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(READ_CPPFLAGS) -Itools/read $(CFLAGS) $(WARN) -o $@ tests/e2e/test_doors.c tests/e2e/harness.c \
		$(READ_LIB_OBJ) -lcmocka -lzstd $(READ_LIBS) -lm
TEST_PROGS += $(TEST_BIN)/test_doors

.PHONY: test-build
test-build: all $(TEST_PROGS)

test: test-build
	@tests/run.sh
