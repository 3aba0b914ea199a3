"""The calling thread's hardware counters through perf_event_open(2), read around a block of work: what the
perf tool would count, on a host that has no perf (the H200's). User space only; each event its own counter,
so the kernel may multiplex them when there are more than the core has (the figures are then scaled, and say
so). Used by bench_alloc_pair.py --inproc --pmu: a traced block's counts against a passed-through one's, per
pair or step, say in which resource the tracer's time goes (instructions, L1 instruction-cache misses, ...),
where the wall-clock difference alone cannot.

    c = Counters()            # None of the events opened: c.error says why; c.read() is then {}
    before = c.read(); work(); after = c.read()
    Counters.delta(before, after)   # {name: count}, and "multiplexed": 1 where the kernel shared a counter"""
import ctypes
import os
import struct

# (name, perf type, config): PERF_TYPE_HARDWARE = 0, PERF_TYPE_HW_CACHE = 3 (cache | op << 8 | result << 16;
# L1D 0, L1I 1, LL 2, ITLB 4; op read 0; result miss 1)
EVENTS = [
    ("cycles", 0, 0),
    ("instructions", 0, 1),
    ("branch_misses", 0, 5),
    ("l1i_misses", 3, 1 | 0 << 8 | 1 << 16),
    ("l1d_misses", 3, 0 | 0 << 8 | 1 << 16),
    ("itlb_misses", 3, 4 | 0 << 8 | 1 << 16),
]
_NR_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}.get(os.uname().machine)
_READ_TIMES = 1 | 2  # PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING
_EXCLUDE_KERNEL_HV = 1 << 5 | 1 << 6


def _attr(ptype, config):
    # perf_event_attr as of PERF_ATTR_SIZE_VER0 (64 bytes): type, size, config, sample_period, sample_type,
    # read_format, the flag bits, wakeup_events, bp_type, config1
    return struct.pack("=IIQQQQQIIQ", ptype, 64, config, 0, 0, _READ_TIMES, _EXCLUDE_KERNEL_HV, 0, 0, 0)


class Counters:
    def __init__(self, events=EVENTS):
        self.fds, self.error = {}, None
        if _NR_PERF_EVENT_OPEN is None:
            self.error = "perf_event_open: not known on %s" % os.uname().machine
            return
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        failed = []
        for name, ptype, config in events:
            buf = ctypes.create_string_buffer(_attr(ptype, config), 64)
            fd = libc.syscall(_NR_PERF_EVENT_OPEN, buf, 0, -1, -1, 8)  # this thread, any CPU, FD_CLOEXEC
            if fd < 0:
                failed.append("%s (%s)" % (name, os.strerror(ctypes.get_errno())))
            else:
                self.fds[name] = fd
        if not self.fds:
            self.error = "perf_event_open: " + ", ".join(failed)

    def read(self):
        """{name: (value, time enabled, time running)}"""
        return {name: struct.unpack("=QQQ", os.read(fd, 24)) for name, fd in self.fds.items()}

    @staticmethod
    def delta(before, after):
        """{name: count between the two reads}, scaled where the counter ran part of the time"""
        out, shared = {}, 0
        for name, (v1, e1, r1) in after.items():
            v0, e0, r0 = before[name]
            ran, enabled = r1 - r0, e1 - e0
            if ran <= 0:
                continue
            shared |= ran < enabled
            out[name] = (v1 - v0) * enabled / ran
        if shared:
            out["multiplexed"] = 1
        return out

    def close(self):
        for fd in self.fds.values():
            os.close(fd)
        self.fds = {}
