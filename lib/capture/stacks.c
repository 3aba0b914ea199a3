/* The stack table: each distinct backtrace is stored once and named by a small id, so an event or an
 * allocation record carries four bytes instead of its frames. Id 0 means "no backtrace". All calls
 * are made with ot_lock held. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "capture/stacks.h"
#include "common/pages.h"
#include "common/stage.h"

struct entry {
    uint64_t hash;
    uint64_t off; /* into frames */
    uint32_t n;
    uint32_t flags;
};

static struct entry *entries; /* entries[0] unused: id 0 is "none" */
static uint32_t nentries = 1, capentries;
static uint64_t *frames;
static uint64_t nframes, capframes;
static uint32_t *index_; /* open addressing over entry ids; 0 = empty */
static uint64_t index_mask;

/* Four lanes, each a multiply/xor-shift chain over every fourth frame, folded at the end: one chain over
 * all frames would wait on each multiply in turn (a deep stack is 50-60 frames, every allocation). */
static uint64_t hash_frames(const uint64_t *f, int n, unsigned flags)
{
    const uint64_t k = 0xff51afd7ed558ccdull;
    uint64_t a = 0x9E3779B97F4A7C15ull ^ ((uint64_t)n << 32) ^ flags, b = 0xC2B2AE3D27D4EB4Full, c = 0x165667B19E3779F9ull,
             d = 0x27D4EB2F165667C5ull;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        a = (a ^ f[i]) * k;
        b = (b ^ f[i + 1]) * k;
        c = (c ^ f[i + 2]) * k;
        d = (d ^ f[i + 3]) * k;
        a ^= a >> 32;
        b ^= b >> 32;
        c ^= c >> 32;
        d ^= d >> 32;
    }
    for (; i < n; i++) {
        a = (a ^ f[i]) * k;
        a ^= a >> 32;
    }
    uint64_t h = ((a * k) ^ b) * k;
    h = ((h ^ (h >> 29) ^ c) * k);
    h = ((h ^ (h >> 31) ^ d) * k);
    h ^= h >> 32;
    return h ? h : 1;
}

static uint32_t intern(const uint64_t *f, int n, unsigned flags);

static void *grow(void *p, size_t old_bytes, size_t new_bytes)
{
    /* mmap keeps the tracer's tables out of the program's heap (and away from its malloc hooks). */
    void *q = mmap(NULL, new_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (q == MAP_FAILED)
        return NULL;
    if (p) {
        memcpy(q, p, old_bytes);
        ot_unmap(p, old_bytes);
    }
    return q;
}

static int rehash(uint64_t newcap)
{
    uint32_t *idx = grow(NULL, 0, newcap * sizeof *idx);
    if (!idx)
        return -1;
    for (uint32_t id = 1; id < nentries; id++) {
        uint64_t i = entries[id].hash & (newcap - 1);
        while (idx[i])
            i = (i + 1) & (newcap - 1);
        idx[i] = id;
    }
    if (index_)
        ot_unmap(index_, (index_mask + 1) * sizeof *index_);
    index_ = idx;
    index_mask = newcap - 1;
    return 0;
}

/* The stack this thread interned last: a thread that allocates in a loop asks for the same stack again,
 * and one compare with it costs less than the hash and the table. Ids are never reused (the table only
 * grows, and keeps its stacks across a reset and a fork), so the id stays right. */
static __thread uint32_t last_id __attribute__((tls_model("initial-exec")));
__thread struct ot_stack_memo *ot_stack_hint __attribute__((tls_model("initial-exec")));

uint32_t ot_stack_intern(const uint64_t *f, int n, unsigned flags)
{
    struct ot_stack_memo *hint = ot_stack_hint;
    if (hint) {
        ot_stack_hint = NULL; /* for this intern only */
        OT_STAGE_CACHE(OT_C_STACK_HINT, hint->id != 0 && hint->flags == flags && hint->id < nentries);
        if (hint->id != 0 && hint->flags == flags && hint->id < nentries)
            return last_id = hint->id;
    }
    if (n <= 0 && !flags)
        return 0;
    uint32_t last = last_id;
    if (last && last < nentries) {
        const struct entry *e = &entries[last];
        if (e->n == (uint32_t)n && e->flags == flags && memcmp(&frames[e->off], f, (size_t)n * sizeof *f) == 0) {
            OT_STAGE_CACHE(OT_C_STACK_LAST, 1);
            if (hint)
                *hint = (struct ot_stack_memo){last, flags};
            return last;
        }
    }
    OT_STAGE_CACHE(OT_C_STACK_LAST, 0);
    uint32_t id = intern(f, n, flags);
    if (id) {
        last_id = id;
        if (hint)
            *hint = (struct ot_stack_memo){id, flags};
    }
    return id;
}

static uint32_t intern(const uint64_t *f, int n, unsigned flags)
{
    uint64_t h = hash_frames(f, n, flags);
    if (!index_ && rehash(4096) != 0)
        return 0;
    uint64_t i = h & index_mask;
    for (uint32_t id; (id = index_[i]) != 0; i = (i + 1) & index_mask) {
        const struct entry *e = &entries[id];
        if (e->hash == h && e->n == (uint32_t)n && e->flags == flags &&
            memcmp(&frames[e->off], f, (size_t)n * sizeof *f) == 0)
            return id;
    }
    if (nentries + 1 > capentries) {
        uint32_t nc = capentries ? capentries * 2 : 4096;
        struct entry *ne = grow(entries, capentries * sizeof *entries, nc * sizeof *entries);
        if (!ne)
            return 0;
        entries = ne;
        capentries = nc;
    }
    if (nframes + (uint64_t)n > capframes) {
        uint64_t nc = capframes ? capframes * 2 : 65536;
        while (nc < nframes + (uint64_t)n)
            nc *= 2;
        uint64_t *nf = grow(frames, capframes * sizeof *frames, nc * sizeof *frames);
        if (!nf)
            return 0;
        frames = nf;
        capframes = nc;
    }
    uint32_t id = nentries++;
    OT_STAGE_STACKS(nentries);
    entries[id] = (struct entry){.hash = h, .off = nframes, .n = (uint32_t)n, .flags = flags};
    memcpy(&frames[nframes], f, (size_t)n * sizeof *f);
    nframes += (uint64_t)n;
    index_[i] = id;
    if ((uint64_t)nentries * 2 > index_mask + 1)
        rehash((index_mask + 1) * 2);
    return id;
}

uint32_t ot_stack_count(void)
{
    return nentries;
}

int ot_stack_get(uint32_t id, struct ot_stack_view *out)
{
    if (id == 0 || id >= nentries)
        return -1;
    out->frames = &frames[entries[id].off];
    out->n = entries[id].n;
    out->flags = entries[id].flags;
    return 0;
}
