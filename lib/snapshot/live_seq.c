/* The live set in seq order (LIVE_SEQ), column by column: the ordering, by a scatter or a radix sort,
 * and the delta-coded columns of OT_RECORD_FIELDS. */
#include <string.h>
#include <sys/mman.h>

#include "common/defs.h"
#include "common/pages.h"
#include "record/rec.h"
#include "snapshot/writer.h"

struct seq_slot {
    uint64_t seq;
    uint64_t slot;
};

static void *scratch(size_t bytes)
{
    void *p = mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (bytes >= (2u << 20))
        madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

/* LSD radix sort by seq, 11 bits a pass, as many passes as the largest seq needs. Returns the sorted
 * array (a or tmp). */
static struct seq_slot *sort_by_seq(struct seq_slot *a, struct seq_slot *tmp, uint64_t n, uint64_t max_seq)
{
    enum { BITS = 11, RADIX = 1 << BITS };
    static uint64_t count[RADIX]; /* the recorder is held: one snapshot at a time */
    for (unsigned shift = 0; shift < 64 && (max_seq >> shift); shift += BITS) {
        memset(count, 0, sizeof count);
        for (uint64_t i = 0; i < n; i++)
            count[(a[i].seq >> shift) & (RADIX - 1)]++;
        uint64_t sum = 0;
        for (int k = 0; k < RADIX; k++) {
            uint64_t c = count[k];
            count[k] = sum;
            sum += c;
        }
        for (uint64_t i = 0; i < n; i++)
            tmp[count[(a[i].seq >> shift) & (RADIX - 1)]++] = a[i];
        struct seq_slot *t = a;
        a = tmp;
        tmp = t;
    }
    return a;
}

/* order[k] (occupied slots, table order) with seqs[k], put in seq order. When the seqs span at most a
 * few times n (a big live set made recently), one scatter into a table indexed by seq; otherwise a radix
 * sort. Returns -1 without memory, or if two records claim one seq. */
static int sort_slots_by_seq(uint32_t *order, const uint64_t *seqs, uint64_t n, uint64_t min_seq,
                             uint64_t max_seq)
{
    uint64_t range = max_seq - min_seq + 1;
    if (range / 4 <= n) {
        uint32_t *at = scratch(range * sizeof *at);
        if (!at)
            return -1;
        int dup = 0;
        for (uint64_t k = 0; k < n; k++) {
            uint32_t *e = &at[seqs[k] - min_seq];
            dup |= *e != 0;
            *e = order[k] + 1;
        }
        uint64_t k = 0;
        for (uint64_t j = 0; j < range && k < n; j++)
            if (at[j])
                order[k++] = at[j] - 1;
        ot_unmap(at, range * sizeof *at);
        return dup || k != n ? -1 : 0;
    }
    struct seq_slot *a = scratch(2 * n * sizeof *a);
    if (!a)
        return -1;
    for (uint64_t k = 0; k < n; k++)
        a[k] = (struct seq_slot){seqs[k], order[k]};
    struct seq_slot *sorted = sort_by_seq(a, a + n, n, max_seq);
    for (uint64_t k = 0; k < n; k++)
        order[k] = (uint32_t)sorted[k].slot;
    ot_unmap(a, 2 * n * sizeof *a);
    return 0;
}

/* The live set, and how many of its records each device's peak set shares (PEAK_REF counts them).
 * LIVE_SEQ in seq order with delta-coded times and addresses is about half the bytes of LIVE and
 * compresses several times better; without memory for the ordering or the columns, LIVE in table
 * order. Returns the section type written. The recorder is held. */
uint32_t ot_encode_live(struct ot_buf *b, uint64_t peak_shared[OT_MAX_DEVICES])
{
    const struct ot_liveset *l = ot_record_live();
    uint64_t n = l->count, k = 0, min_seq = UINT64_MAX, max_seq = 0, peak_seq[OT_MAX_DEVICES];
    for (int d = 0; d < OT_MAX_DEVICES; d++)
        peak_seq[d] = ot_record_device(d)->peak_seq;
    uint32_t *order = n && l->mask < UINT32_MAX ? scratch(n * sizeof *order) : NULL;
    uint64_t *seqs = order ? scratch(n * sizeof *seqs) : NULL;
    memset(peak_shared, 0, OT_MAX_DEVICES * sizeof *peak_shared);
    for (uint64_t i = 0; l->slots && i <= l->mask; i++) {
        const struct ot_rec *r = &l->slots[i];
        if (!r->size)
            continue;
        if (seqs && k < n) {
            order[k] = (uint32_t)i;
            seqs[k] = r->seq;
            min_seq = r->seq < min_seq ? r->seq : min_seq;
            max_seq = r->seq > max_seq ? r->seq : max_seq;
        }
        k++;
        if (r->device >= 0 && r->device < OT_MAX_DEVICES &&
            ot_peak_ref_shares(r->device, r->cat, r->seq, r->device, peak_seq[r->device]))
            peak_shared[r->device]++;
    }
    int ordered = seqs && k == n && sort_slots_by_seq(order, seqs, n, min_seq, max_seq) == 0;
    if (seqs)
        ot_unmap(seqs, n * sizeof *seqs);
    /* Column by column (docs/FORMAT.md): a column that barely changes (device, category, api, tid)
     * compresses to almost nothing and at memory speed, where the same bytes interleaved record by
     * record cost zstd a match search each. */
    enum { AHEAD = 16, NCOL = OT_RECORD_NFIELDS }; /* seq order is a random walk over the table: keep misses in flight */
    size_t cap = (size_t)n * 10; /* a varint takes at most 10 bytes; only touched pages cost memory */
    uint8_t *cols = ordered ? scratch(NCOL * cap) : NULL, *end[NCOL];
    ot_buf_uv(b, n);
    if (!cols) {
        if (order)
            ot_unmap(order, n * sizeof *order);
        for (uint64_t i = 0; l->slots && i <= l->mask; i++)
            if (l->slots[i].size)
                ot_encode_rec(b, &l->slots[i]);
        return OT_SEC_LIVE;
    }
    for (int c = 0; c < NCOL; c++)
        end[c] = cols + c * cap;
    struct ot_rec prev = {0};
    for (uint64_t i = 0; i < n; i++) {
        if (i + AHEAD < n) {
            const char *next = (const char *)&l->slots[order[i + AHEAD]];
            __builtin_prefetch(next);
            __builtin_prefetch(next + sizeof(struct ot_rec) - 1);
        }
        const struct ot_rec *r = &l->slots[order[i]];
#define OT_X_COL(col, name, coding, seq_coding, doc)                                                   \
    end[col] = ot_put_field(end[col], OT_CODING_##seq_coding, REC_##name(r), REC_##name(&prev));
        OT_RECORD_FIELDS(OT_X_COL)
#undef OT_X_COL
        prev = *r;
    }
    for (int c = 0; c < NCOL; c++)
        ot_buf_put(b, cols + c * cap, (size_t)(end[c] - (cols + c * cap)));
    ot_unmap(cols, NCOL * cap);
    ot_unmap(order, n * sizeof *order);
    return OT_SEC_LIVE_SEQ;
}
