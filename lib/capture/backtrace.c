/* Native backtraces. The walk follows each frame's rule from the modules' call-frame information
 * (cfi.c), kept per thread by return address, so a repeated call site costs a few loads per frame and
 * never takes a lock, masks signals or walks the list of loaded objects. A stack it cannot follow (a
 * frame without unwind information, a signal frame, a stack outside the thread's own) is handed whole
 * to libunwind's unw_backtrace, as before. The tracer's own frames are dropped by address range, so the
 * first frame kept is the caller of the driver entry point (cudart, c10, the program). */
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "capture/cfi.h"
#include "capture/loader.h"
#include "internal.h"

static uintptr_t self_lo, self_hi;

#define RULE_BITS 11
#define NRULES (1u << RULE_BITS)

/* A thread's rules, and its stack's bounds: every read the walk makes is checked against them. */
struct walker {
    uint64_t stack_lo, stack_hi;
    uint32_t used;
    struct ot_frame_rule rules[NRULES];
};

static __thread struct walker *walker_tls __attribute__((tls_model("initial-exec")));
static __thread int walker_failed __attribute__((tls_model("initial-exec")));
/* A thread whose stacks keep crossing a frame the rules cannot follow (code without unwind information)
 * would pay for a partial walk and then libunwind's on every event: after WALK_FAILS failures in a row it
 * goes straight to libunwind for the next WALK_REST backtraces, then tries again. */
#define WALK_FAILS 4
#define WALK_REST 256
static __thread unsigned walk_fails __attribute__((tls_model("initial-exec")));
static __thread unsigned walk_rest __attribute__((tls_model("initial-exec")));
static pthread_key_t walker_key;
static int walker_key_ok;

/* At thread exit. Destructors that run after this one may still allocate: they get libunwind. */
static void walker_free(void *p)
{
    walker_tls = NULL;
    walker_failed = 1;
    munmap(p, sizeof(struct walker));
}

static int find_self(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
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
    ot_loader_enter();
    dl_iterate_phdr(find_self, (void *)(uintptr_t)&ot_backtrace_init);
    ot_loader_leave();
    walker_key_ok = pthread_key_create(&walker_key, walker_free) == 0;
}

/* Once per thread: the table (mmap, out of the program's heap) and the stack's bounds. */
static struct walker *walker_get(void)
{
    struct walker *w = walker_tls;
    if (OT_LIKELY(w != NULL) || walker_failed)
        return w;
    walker_failed = 1;
    pthread_attr_t attr;
    void *addr;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &attr) != 0)
        return NULL;
    int ok = pthread_attr_getstack(&attr, &addr, &size) == 0;
    pthread_attr_destroy(&attr);
    if (!ok)
        return NULL;
    w = mmap(NULL, sizeof *w, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (w == MAP_FAILED)
        return NULL;
    w->stack_lo = (uint64_t)(uintptr_t)addr;
    w->stack_hi = w->stack_lo + size;
    if (walker_key_ok)
        pthread_setspecific(walker_key, w);
    walker_failed = 0;
    walker_tls = w;
    return w;
}

static const struct ot_frame_rule *rule_for(struct walker *w, uint64_t pc)
{
    uint32_t i = (uint32_t)((pc * 0x9E3779B97F4A7C15ull) >> (64 - RULE_BITS));
    struct ot_frame_rule *r;
    for (;; i = (i + 1) & (NRULES - 1)) {
        r = &w->rules[i];
        if (r->pc == pc && r->kind != OT_RULE_EMPTY)
            return r;
        if (r->kind == OT_RULE_EMPTY)
            break;
    }
    if (w->used >= NRULES / 4 * 3) { /* full: start over rather than probe long chains */
        memset(w->rules, 0, sizeof w->rules);
        w->used = 0;
        r = &w->rules[(uint32_t)((pc * 0x9E3779B97F4A7C15ull) >> (64 - RULE_BITS))];
    }
    ot_cfi_rule(pc, r);
    r->pc = pc;
    w->used++;
    return r;
}

static inline int on_stack(const struct walker *w, uint64_t lo, uint64_t a)
{
    return a >= lo && a <= w->stack_hi - 8 && !(a & 7);
}

/* Return addresses from this function's caller outwards, as unw_backtrace gives them; -1 when the stack
 * has a frame the rules cannot follow. */
__attribute__((noinline)) int ot_native_walk(uint64_t *frames, int want)
{
    struct walker *w = walker_get();
    if (!w)
        return -1;
    uint64_t pc, sp, bp;
    __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(pc), "=r"(sp), "=r"(bp));
    const uint64_t lo = sp;
    if (!on_stack(w, lo, sp))
        return -1; /* running on another stack (sigaltstack, a coroutine's) */
    int n = 0;
    for (int first = 1; n < want; first = 0) {
        const struct ot_frame_rule *r = rule_for(w, first ? pc : pc - 1);
        if (r->kind == OT_RULE_LAST)
            break;
        if (r->kind != OT_RULE_OK)
            return -1;
        uint64_t cfa;
        if (r->cfa_reg == OT_CFA_RSP) {
            cfa = sp + (uint64_t)(int64_t)r->cfa_off;
        } else if (r->cfa_reg == OT_CFA_RBP) {
            cfa = bp + (uint64_t)(int64_t)r->cfa_off;
        } else {
            uint64_t at = bp + (uint64_t)(int64_t)r->cfa_off;
            if (!on_stack(w, lo, at))
                return -1;
            cfa = *(const uint64_t *)(uintptr_t)at;
        }
        if (cfa <= sp || !on_stack(w, lo, cfa - 8))
            return -1;
        uint64_t ra = *(const uint64_t *)(uintptr_t)(cfa - 8);
        if (r->rbp_how == OT_RBP_AT_CFA || r->rbp_how == OT_RBP_AT_RBP) {
            uint64_t at = (r->rbp_how == OT_RBP_AT_CFA ? cfa : bp) + (uint64_t)(int64_t)r->rbp_off;
            if (!on_stack(w, lo, at))
                return -1;
            bp = *(const uint64_t *)(uintptr_t)at;
        } else if (r->rbp_how == OT_RBP_UNDEF) {
            bp = 0;
        }
        sp = cfa;
        pc = ra;
        if (ra < 0x4000) /* the end of the chain, as libunwind reads it */
            break;
        frames[n++] = ra;
    }
    return n;
}

size_t ot_stack_room(void)
{
    struct walker *w = walker_get();
    uint64_t sp = (uint64_t)(uintptr_t)__builtin_frame_address(0);
    if (!w || sp < w->stack_lo || sp >= w->stack_hi)
        return SIZE_MAX;
    return (size_t)(sp - w->stack_lo);
}

/* Fills frames (room for OT_MAX_FRAMES) with return addresses, innermost first, each shifted left by one
 * (the low bit tags Python frames, see OT_FRAME_PYTHON). Returns how many, at most max; sets
 * OT_STACK_TRUNCATED in *flags when the stack went deeper. Unwinds straight into the caller's buffer and
 * compacts it in place: no second copy. */
int ot_backtrace(uint64_t *frames, int max, unsigned *flags)
{
    _Static_assert(sizeof(void *) == sizeof(uint64_t), "frames hold pointers");
    int want = max + 8 > OT_MAX_FRAMES ? OT_MAX_FRAMES : max + 8; /* our own frames come first */
    int n = -1;
    if (OT_LIKELY(walk_rest == 0)) {
        n = ot_native_walk(frames, want);
        if (n >= 0)
            walk_fails = 0;
        else if (++walk_fails >= WALK_FAILS)
            walk_rest = WALK_REST;
    } else {
        walk_rest--;
    }
    if (n < 0 && ot_stack_room() < OT_UNWIND_STACK) {
        n = 0; /* a thread with a small stack (PTHREAD_STACK_MIN): no backtrace rather than a crash */
        *flags |= OT_STACK_TRUNCATED;
    }
    if (n < 0) {
        ot_loader_enter(); /* libunwind finds each frame's module with dl_iterate_phdr */
        n = unw_backtrace((void **)frames, want);
        ot_loader_leave();
    }
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
