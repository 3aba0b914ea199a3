# oomtrace: `make` builds build/liboomtrace.so and build/oomtrace-read; `make test`, `make demo`, `make bench`.
CUDA_HOME ?= $(firstword $(wildcard /usr/local/cuda /usr/local/cuda-13.0 /usr/local/cuda-13))
CC ?= cc
CFLAGS ?= -O2 -g
WARN := -Wall -Wextra -Wno-unused-parameter -Wshadow -Wstrict-prototypes
CPPFLAGS += -Iinclude -I$(CUDA_HOME)/include -D_GNU_SOURCE
B := build
# Header dependencies: each compile writes the headers it read into a .d file beside its output, included at
# the end, so that a header change rebuilds every object and program that includes it. The objects take
# -MMD -MP; a command that compiles several sources straight into a program (tests, bench, the stand-in driver)
# runs under DEPS, the preprocessor appending each source's headers to $@.d (DEPENDENCIES_OUTPUT: -MMD would
# keep only its last source's). A header that no longer exists is made by the empty %.h rule, as -MP arranges.
DEPS = rm -f $@.d; DEPENDENCIES_OUTPUT='$@.d $@'
PREFIX ?= /usr/local

LIB_SRC := $(wildcard lib/*/*.c)
LIB_ASM := $(wildcard lib/*/*.S)
LIB_HDR := $(wildcard lib/*.h lib/*/*.h lib/*/*.def)
LIB_OBJ := $(LIB_SRC:%.c=$(B)/%.o) $(LIB_ASM:%.S=$(B)/%.o) $(B)/lib/runtime/companion_src.o
# How every build of the library is linked, but the wheel's (which links zstd in): this one, the stage build, the
# profile's training copies, the bench's Python-link builds
LIB_LINK := -Wl,-soname,liboomtrace.so -Wl,--no-undefined -pthread -lunwind -lzstd -ldl
# The Python companion's sources, embedded into the library as the table ot_py_modules (name, NUL-terminated
# source), which lib/runtime/companion.c loads as modules in this order: each after the modules it
# imports, the entry point _oomtrace_companion last. Every lib/companion/*.py must be listed.
COMPANION_PY := lib/companion/_oomtrace_payload.py lib/companion/_oomtrace_frameworks.py \
	lib/companion/_oomtrace_roles.py lib/companion/_oomtrace_steps.py \
	lib/companion/_oomtrace_companion.py
ifneq ($(sort $(COMPANION_PY)),$(sort $(wildcard lib/companion/*.py)))
$(error COMPANION_PY (Makefile) must list every lib/companion/*.py, in load order)
endif
READ_SRC := tools/oomtrace-read.c $(wildcard tools/read/*/*.c tools/read/*/*/*.c)
READ_HDR := $(wildcard tools/read/*/*.h tools/read/*/*/*.h)
READ_OBJ := $(READ_SRC:%.c=$(B)/%.o)
FAKE_SRC := $(wildcard tests/fakecuda/*.c)

# libdw is optional for the reader: without it, names come from the snapshot's dump-time symbols.
HAVE_LIBDW := $(shell printf '#include <elfutils/libdwfl.h>\nint main(void){return 0;}' | $(CC) -x c - -o /dev/null -ldw 2>/dev/null && echo 1)
ifeq ($(HAVE_LIBDW),1)
READ_CPPFLAGS := -DOT_HAVE_LIBDW=1
READ_LIBS := -ldw
endif

.PHONY: all deps test demo bench install wheel clean check-deps
all: check-deps $(B)/liboomtrace.so $(B)/oomtrace-read $(B)/oomtrace $(B)/oomtrace-report.sh $(B)/oomtrace-supervise $(B)/fake/libcuda.so.1

check-deps:
	@tools/deps.sh --check

deps:
	@tools/deps.sh --install

# The library is built profile-guided (PGO=0: without). Its objects are first compiled with -fprofile-generate,
# that library runs a training step's mix against the stand-in driver (tools/pgo-train.sh: PGO_PYTHON names the
# Pythons it trains with, default python3), and the objects are then compiled from those counts: the paths
# the training ran laid out together, the rest moved aside. An allocation after the step's own work pays for
# each line of the tracer's code it runs (docs/PERFORMANCE.md, issue 16's fifteenth pass). Code the training
# never ran is compiled as without a profile (-fprofile-partial-training); loops are not unrolled or peeled,
# which ran more lines, not fewer. GCC only: with a compiler that does not take these options, or when the
# training cannot run, the library is built without a profile (the training says why on stderr).
ifndef PGO
PGO := $(shell $(CC) -fprofile-partial-training -fprofile-update=atomic -fno-tracer -x c -c /dev/null -o /dev/null \
	2>/dev/null && echo 1 || echo 0)
endif
PGO_DIR := $(abspath $(B))/pgo
ifeq ($(PGO),1)
pgo_use = -fprofile-use=$(PGO_DIR)/$(1) -fprofile-partial-training -Wno-missing-profile -fno-unroll-loops \
	-fno-peel-loops -fno-tracer -fno-ipa-cp-clone
pgo_dep = $(PGO_DIR)/$(1).stamp
endif
# What the library's objects are compiled with, in a file that changes only when it does: a new compiler, new
# flags, PGO on or off or other Pythons to train with make the objects (and the profiles) again. A profile's
# counts do not fit objects compiled with other flags (GCC stops on them), and objects left instrumented by an
# interrupted build are never taken for final ones. LIB_FLAGS_TRACK=0 leaves it out: the profile's own make,
# and the sanitizer trees, which compile some objects with flags of their own on purpose (make tsan).
LIB_FLAGS_TRACK ?= 1
ifeq ($(LIB_FLAGS_TRACK),1)
LIB_FLAGS := $(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) PGO=$(PGO) PGO_PYTHON=$(PGO_PYTHON)
ifneq ($(LIB_FLAGS),$(file <$(B)/lib.flags))
$(shell mkdir -p $(B))
$(file >$(B)/lib.flags,$(LIB_FLAGS))
endif
LIB_FLAGS_DEP := $(B)/lib.flags
$(B)/lib.flags: ;
endif

$(B)/lib/%.o: lib/%.c $(B)/lib/%.d $(LIB_HDR) include/oomtrace_format.h include/oomtrace.h $(LIB_FLAGS_DEP) \
		$(call pgo_dep,lib)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Ilib $(CFLAGS) $(call pgo_use,lib) $(WARN) -MMD -MP -fPIC -fvisibility=hidden -pthread -c $< -o $@

$(B)/lib/%.o: lib/%.S
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) -Ilib -fPIC -c $< -o $@

$(B)/lib/runtime/companion_src.S: $(COMPANION_PY) Makefile
	@mkdir -p $(dir $@)
	@{ printf '\t.section .rodata\n'; i=0; \
	  for f in $(COMPANION_PY); do \
	    printf 'ot_pyname_%d:\n\t.asciz "%s"\not_pysrc_%d:\n\t.incbin "%s"\n\t.byte 0\n' $$i $$(basename $$f .py) $$i $$f; \
	    i=$$((i + 1)); \
	  done; \
	  printf '\t.section .data.rel.ro,"aw"\n\t.balign 8\n\t.globl ot_py_modules\n\t.hidden ot_py_modules\not_py_modules:\n'; \
	  i=0; for f in $(COMPANION_PY); do printf '\t.quad ot_pyname_%d, ot_pysrc_%d\n' $$i $$i; i=$$((i + 1)); done; \
	  printf '\t.quad 0, 0\n\t.section .note.GNU-stack,"",@progbits\n'; } >$@

$(B)/lib/runtime/companion_src.o: $(B)/lib/runtime/companion_src.S
	$(DEPS) $(CC) -c $< -o $@

$(B)/liboomtrace.so: $(LIB_OBJ)
	$(DEPS) $(CC) $(LDFLAGS) -shared -o $@ $^ $(LIB_LINK)

$(B)/tools/%.o: tools/%.c $(B)/tools/%.d $(READ_HDR) include/oomtrace_format.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) -Itools/read $(READ_CPPFLAGS) $(CFLAGS) $(WARN) -MMD -MP -c $< -o $@

$(B)/oomtrace-read: $(READ_OBJ)
	$(DEPS) $(CC) -o $@ $^ -lzstd $(READ_LIBS) -lm

# The launcher finds the library beside itself, and the process it becomes while the command runs.
$(B)/oomtrace: tools/oomtrace
	@mkdir -p $(dir $@)
	cp $< $@

# Its after-run part (the report, the gate, the summary), which it sources from beside itself.
$(B)/oomtrace-report.sh: tools/oomtrace-report.sh
	@mkdir -p $(dir $@)
	cp $< $@

$(B)/oomtrace-supervise: tools/oomtrace-supervise.c
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -o $@ $<

# The stand-in driver: a libcuda.so.1 that simulates devices of a set capacity (tests/fakecuda/README).
# Hidden by default: it exports only the driver's entry points and its test hooks (API in fakecuda.h).
$(B)/fake/libcuda.so.1: $(FAKE_SRC) $(wildcard tests/fakecuda/*.h)
	@mkdir -p $(dir $@)
	$(DEPS) $(CC) $(CPPFLAGS) $(CFLAGS) $(WARN) -fPIC -shared -fvisibility=hidden -pthread -Wl,-soname,libcuda.so.1 \
		-Wl,-Bsymbolic -o $@ $(FAKE_SRC)
	ln -sf libcuda.so.1 $(B)/fake/libcuda.so

include tests/tests.mk

# make install PREFIX=/usr/local: the library, the tools, the header, man pages, and the Python package where
# $(PYTHON) looks for PREFIX's packages (PYTHON_SITE: PREFIX's site- or dist-packages on its path, else the
# posix_prefix scheme's). The package's bin/ links to the installed launcher, library and reader.
PYTHON ?= python3
PYTHON_SITE ?= $(shell $(PYTHON) -c 'import sys, sysconfig; p = "$(PREFIX)".rstrip("/"); \
	c = [d for d in sys.path if d.startswith(p + "/lib/") and d.endswith(("site-packages", "dist-packages"))]; \
	print(c[0] if c else sysconfig.get_path("purelib", "posix_prefix", vars={"base": p, "platbase": p}))')
PY_SRC := $(wildcard python/oomtrace/*.py)
MAN_PAGES := docs/man/oomtrace.1 docs/man/oomtrace-read.1
# The documents that --help and the manual pages name, installed where both say (share/doc/oomtrace).
DOC_FILES := README.md docs/JSON.md docs/FORMATS.md docs/FORMAT.md
install: $(B)/liboomtrace.so $(B)/oomtrace-read $(B)/oomtrace-supervise
	@[ -n "$(PYTHON_SITE)" ] || { echo "make install: $(PYTHON) did not say where its packages go; set PYTHON_SITE=" >&2; exit 2; }
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/lib $(DESTDIR)$(PREFIX)/lib/oomtrace $(DESTDIR)$(PREFIX)/include \
		$(DESTDIR)$(PREFIX)/share/man/man1 $(DESTDIR)$(PREFIX)/share/doc/oomtrace $(DESTDIR)$(PYTHON_SITE)/oomtrace/bin
	install -m 0755 $(B)/liboomtrace.so $(DESTDIR)$(PREFIX)/lib/liboomtrace.so
	install -m 0755 $(B)/oomtrace-read $(DESTDIR)$(PREFIX)/bin/oomtrace-read
	install -m 0755 tools/oomtrace $(DESTDIR)$(PREFIX)/bin/oomtrace
	install -m 0755 $(B)/oomtrace-supervise $(DESTDIR)$(PREFIX)/lib/oomtrace/oomtrace-supervise
	install -m 0644 tools/oomtrace-report.sh $(DESTDIR)$(PREFIX)/lib/oomtrace/oomtrace-report.sh
	install -m 0644 include/oomtrace.h $(DESTDIR)$(PREFIX)/include/oomtrace.h
	install -m 0644 $(MAN_PAGES) $(DESTDIR)$(PREFIX)/share/man/man1/
	install -m 0644 $(DOC_FILES) $(DESTDIR)$(PREFIX)/share/doc/oomtrace/
	install -m 0644 $(PY_SRC) $(DESTDIR)$(PYTHON_SITE)/oomtrace/
	ln -sf $(PREFIX)/bin/oomtrace $(PREFIX)/bin/oomtrace-read $(PREFIX)/lib/liboomtrace.so \
		$(DESTDIR)$(PYTHON_SITE)/oomtrace/bin/
	@$(PYTHON) -c 'import sys; d = "$(PYTHON_SITE)"; \
		print("Python package: " + d + "/oomtrace" + ("" if d in sys.path else \
		" (not on $(PYTHON)'"'"'s path: set PYTHONPATH=" + d + ", or pip install the wheel of make wheel)"))'

# The wheel's library and reader need nothing beyond the C library, so that pip's users on a slim image (no
# libunwind8, no libdw1) are not refused at every command (walk 8, #31). The reader links zstd, libdw and what
# libdw needs statically. The library links zstd statically, its symbols hidden (--exclude-libs: the program's own
# zstd is not interposed); Debian's libunwind.a is not position-independent, so libunwind.so.8 and what it needs
# (liblzma) are copied beside it, found by its RPATH $ORIGIN: DT_RPATH (--disable-new-dtags), which the loader
# also searches for the dependencies of libunwind itself, unlike DT_RUNPATH. The C library, libm, libgcc_s and
# the loader are the system's (every glibc system has them; the wheel's tag is this machine's platform).
WHEEL_BIN := $(B)/wheel-bin
WHEEL_SYSTEM_LIBS := ^(libc|libm|libdl|libpthread|librt|libgcc_s)\.so|^linux-vdso|^/lib64/ld-linux
$(WHEEL_BIN)/liboomtrace.so: $(LIB_OBJ)
	@rm -rf $(WHEEL_BIN) && mkdir -p $(WHEEL_BIN)
	$(CC) -shared -o $@ $^ -Wl,-soname,liboomtrace.so -Wl,--no-undefined -pthread -lunwind -Wl,-Bstatic -lzstd \
		-Wl,-Bdynamic -ldl -Wl,--exclude-libs,libzstd.a -Wl,--disable-new-dtags,-rpath,'$$ORIGIN'
	ldd $@ | awk '$$2 == "=>" && $$3 ~ /^\// { print $$1, $$3 }' | grep -v -E '$(WHEEL_SYSTEM_LIBS)' | \
		while read -r name path; do cp -L "$$path" $(WHEEL_BIN)/"$$name" || exit 1; done
$(WHEEL_BIN)/oomtrace-read: $(READ_OBJ) $(WHEEL_BIN)/liboomtrace.so
	$(CC) -o $@ $(READ_OBJ) -Wl,-Bstatic -lzstd $(if $(READ_LIBS),-ldw -lelf -lz -llzma -lbz2) -Wl,-Bdynamic -lm

# make wheel: build/oomtrace-VERSION-py3-none-linux_x86_64.whl, with the package, launcher, library and reader.
wheel: $(WHEEL_BIN)/liboomtrace.so $(WHEEL_BIN)/oomtrace-read $(B)/oomtrace $(B)/oomtrace-report.sh \
		$(B)/oomtrace-supervise $(PY_SRC) tools/make_wheel.py $(MAN_PAGES) $(DOC_FILES)
	@rm -f $(B)/oomtrace-*.whl
	@$(PYTHON) tools/make_wheel.py --out $(B) --package python/oomtrace \
		--bin $(B)/oomtrace --bin $(B)/oomtrace-report.sh --bin $(B)/oomtrace-supervise \
		$(foreach f,$(wildcard $(WHEEL_BIN)/*),--bin $(f)) \
		$(MAN_PAGES:%=--data share/man/man1=%) $(DOC_FILES:%=--data share/doc/oomtrace=%)

clean:
	rm -rf $(B)

demo: all
	@tools/demo.sh

-include bench/bench.mk
-include tests/fuzz/fuzz.mk

# A profile (PGO, above): $(1) its name, $(2) its instrumented objects, $(3) the objects linked with them
# unchanged (assembled). The instrumented objects are compiled where the final ones go, by a make of its own
# (PGO=0): GCC keys a static function's counts by its object's path, so the counts then fit the final objects.
# They are linked into $(PGO_DIR)/$(1)-train.so, never where the library goes, trained (tools/pgo-train.sh),
# then removed, and the final objects are compiled from the counts. The library's sources, its flags
# ($(B)/lib.flags) and the training make the profile again.
define pgo_profile
$(PGO_DIR)/$(1).stamp: $(LIB_SRC) $(LIB_HDR) $(COMPANION_PY) include/oomtrace_format.h include/oomtrace.h $(LIB_FLAGS_DEP) \
		tools/pgo-train.sh bench/step_mix.py $(B)/fake/libcuda.so.1 $(B)/bench/libstepmix.so $(B)/bench/cold_capture $(3) $(4)
	@rm -rf $(PGO_DIR)/$(1) $(PGO_DIR)/$(1)-train.so $(2) && mkdir -p $(PGO_DIR)/$(1)
	+@$(MAKE) -s --no-print-directory PGO=0 LIB_FLAGS_TRACK=0 \
		CFLAGS="$(CFLAGS) -fprofile-generate=$(PGO_DIR)/$(1) -fprofile-update=atomic" $(2) && \
		$(CC) $(LDFLAGS) -fprofile-generate -shared -o $(PGO_DIR)/$(1)-train.so $(2) $(3) $(LIB_LINK) || \
		echo "oomtrace: $(1): the profile-guided build's instrumented library did not build: built without a profile" >&2
	@[ ! -f $(PGO_DIR)/$(1)-train.so ] || tools/pgo-train.sh $(PGO_DIR)/$(1)-train.so $(PGO_DIR)/$(1) $(B)
	@rm -f $(PGO_DIR)/$(1)-train.so $(2)
	@touch $$@
endef
ifeq ($(PGO),1)
PGO_ASM_OBJ := $(LIB_ASM:%.S=$(B)/%.o) $(B)/lib/runtime/companion_src.o
$(eval $(call pgo_profile,lib,$(LIB_SRC:%.c=$(B)/%.o),$(PGO_ASM_OBJ)))
# (after the library is made again: its profile removes the library's objects)
$(eval $(call pgo_profile,stages,$(LIB_SRC:%.c=$(BENCH_BIN)/stages/%.o),$(PGO_ASM_OBJ),$(B)/liboomtrace.so))
$(eval $(call pgo_profile,pass,$(LIB_SRC:%.c=$(BENCH_BIN)/pass/%.o),$(PGO_ASM_OBJ),$(B)/liboomtrace.so))
endif

%.h: ;
# An object without its .d (a build/ from before they were written) is made again, and gets one. Named, not a
# pattern: a missing prerequisite made by a pattern rule is an intermediate file, which forces nothing.
$(LIB_SRC:%.c=$(B)/%.d) $(READ_SRC:%.c=$(B)/%.d):
-include $(shell find $(B) -name '*.d' 2>/dev/null)
