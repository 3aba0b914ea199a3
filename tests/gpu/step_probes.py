"""What tests/gpu/bench_step_hooks.py reads around each step: the wall clock, the thread's CPU time and, where the
kernel lets a process count its own thread (perf_event_open; a virtual machine without a PMU says ENOENT), the
thread's cycles and instructions. One read gives all of them, as a tuple in the order of `names`.

The thread's CPU time (CLOCK_THREAD_CPUTIME_ID) leaves out the time the thread is not running: other
processes' turns on its core and the waits. A training step that is CPU-bound (the device idles behind the
launches, as in the benchmark's step) costs the user its main thread's time, and the companion's work runs
on that thread, so what it adds to that thread's CPU time is what it adds to the step; the wall clock adds the
scheduler's noise to it (and would show a wait the companion caused: it has none, its marker keeps the GIL)."""
import ctypes
import os
import struct
import time

PERF_TYPE_HARDWARE = 0
PERF_COUNT_HW_CPU_CYCLES = 0
PERF_COUNT_HW_INSTRUCTIONS = 1
PERF_FORMAT_GROUP = 1 << 3
EXCLUDE_KERNEL = 1 << 5
EXCLUDE_HV = 1 << 6
NR_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}


def _open(libc, nr, config, group_fd, exclude_kernel):
    # struct perf_event_attr, its first 64 bytes (PERF_ATTR_SIZE_VER0): type, size, config, sample_period,
    # sample_type, read_format, the flag bits, wakeup_events, bp_type, config1.
    attr = bytearray(64)
    flags = EXCLUDE_HV | (EXCLUDE_KERNEL if exclude_kernel else 0)
    struct.pack_into("IIQQQQQ", attr, 0, PERF_TYPE_HARDWARE, 64, config, 0, 0, PERF_FORMAT_GROUP, flags)
    buf = (ctypes.c_char * 64).from_buffer(attr)
    fd = libc.syscall(nr, buf, 0, -1, group_fd, 0)  # this thread, any CPU
    return fd, ctypes.get_errno()


class ThreadCounters:
    """The calling thread's cycles and instructions, as one group (one read() gives both). `why` says why
    not, when the kernel refuses (then fd is None)."""

    def __init__(self):
        self.fd, self.why, self.kernel = None, "", True
        nr = NR_PERF_EVENT_OPEN.get(os.uname().machine)
        if nr is None:
            self.why = "no perf_event_open number for %s" % os.uname().machine
            return
        libc = ctypes.CDLL(None, use_errno=True)
        for exclude_kernel in (False, True):  # user and kernel where allowed, else the user's part alone
            lead, err = _open(libc, nr, PERF_COUNT_HW_CPU_CYCLES, -1, exclude_kernel)
            if lead < 0:
                self.why = "perf_event_open: %s" % os.strerror(err)
                continue
            member, err = _open(libc, nr, PERF_COUNT_HW_INSTRUCTIONS, lead, exclude_kernel)
            if member < 0:
                os.close(lead)
                self.why = "perf_event_open (instructions): %s" % os.strerror(err)
                continue
            self.fd, self.member, self.kernel, self.why = lead, member, not exclude_kernel, ""
            try:  # a group read gives the count of events, then each value: 24 bytes
                a, b = self.read(), self.read()
                if b[1] <= a[1]:
                    raise OSError("the instructions do not count")
            except (OSError, struct.error) as e:
                os.close(member)
                os.close(lead)
                self.fd, self.why = None, "perf counters opened but not read (%s)" % e
                continue
            return

    def read(self):
        nr, cycles, instructions = struct.unpack("QQQ", os.read(self.fd, 24))
        return cycles, instructions


class Probes:
    """read() -> (wall ns, thread CPU ns[, cycles, instructions]); names says which."""

    def __init__(self, counters=True):
        self.counters = ThreadCounters() if counters else None
        wall, thread = time.perf_counter_ns, time.thread_time_ns
        if self.counters is not None and self.counters.fd is not None:
            fd = self.counters.fd
            self.names = ("wall_ns", "thread_ns", "cycles", "instructions")
            unpack, rd = struct.unpack, os.read

            def read():
                _, c, i = unpack("QQQ", rd(fd, 24))
                return wall(), thread(), c, i
        else:
            self.names = ("wall_ns", "thread_ns")

            def read():
                return wall(), thread()
        self.read = read

    def describe(self):
        c = self.counters
        if c is None:
            return "thread counters not asked for"
        if c.fd is None:
            return "thread counters unavailable (%s)" % c.why
        return "thread counters: cycles and instructions, %s" % ("user and kernel" if c.kernel else "user only")


UNITS = {"wall_ns": ("wall clock", "us", 1e3), "thread_ns": ("thread CPU time", "us", 1e3),
         "cycles": ("cycles", "kcycles", 1e3), "instructions": ("instructions", "k instr.", 1e3)}
