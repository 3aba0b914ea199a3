/* Native backtraces with libunwind. unw_backtrace walks the calling thread's own stack and takes no
 * lock of ours; libunwind's per-thread cache keeps repeated walks near the cost of reading the frames.
 * The tracer's own frames are dropped by address range, so the first frame kept is the caller of the
 * driver entry point (cudart, c10, the program). */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <link.h>
#include <stdint.h>

#include "internal.h"

static uintptr_t self_lo, self_hi;

static int find_self(struct dl_phdr_info *info, size_t size, void *data)
{
    uintptr_t probe = (uintptr_t)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (probe >= lo && probe < hi) {
            self_lo = lo;
            self_hi = hi;
            return 1;
        }
    }
    return 0;
}

void ot_backtrace_init(void)
{
    unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
    dl_iterate_phdr(find_self, (void *)(uintptr_t)&ot_backtrace_init);
}

/* Fills frames (room for OT_MAX_FRAMES) with return addresses, innermost first, each shifted left by one
 * (the low bit tags Python frames, see OT_FRAME_PYTHON). Returns how many, at most max; sets
 * OT_STACK_TRUNCATED in *flags when the stack went deeper. Unwinds straight into the caller's buffer and
 * compacts it in place: no second copy. */
int ot_backtrace(uint64_t *frames, int max, unsigned *flags)
{
    _Static_assert(sizeof(void *) == sizeof(uint64_t), "frames hold pointers");
    int want = max + 8 > OT_MAX_FRAMES ? OT_MAX_FRAMES : max + 8; /* our own frames come first */
    int n = unw_backtrace((void **)frames, want);
    int skip = 0;
    while (skip < n && frames[skip] >= self_lo && frames[skip] < self_hi)
        skip++;
    int out = n - skip < max ? n - skip : max;
    /* A full buffer means the walk stopped at its end, not at the stack's. */
    if (n - skip > max || n == want)
        *flags |= OT_STACK_TRUNCATED;
    for (int i = 0; i < out; i++)
        frames[i] = frames[i + skip] << 1;
    return out < 0 ? 0 : out;
}
