#include "model/util.h"

#include <time.h>

#include <stdarg.h>
#include <stdlib.h>

/* ---- arena ---- */

struct ot_arena_block {
    struct ot_arena_block *next;
    size_t used, cap;
    max_align_t data[];
};

#define OT_ARENA_BLOCK (64u * 1024u)

static void *ot_arena_take(struct ot_arena *a, size_t n)
{
    size_t align = _Alignof(max_align_t);
    if (n > SIZE_MAX - align)
        return NULL;
    n = (n + align - 1) & ~(align - 1);
    if (n == 0)
        n = align;
    if (a->limit && (n > a->limit || a->total > a->limit - n)) {
        a->over_limit = true;
        return NULL;
    }
    struct ot_arena_block *b = a->head;
    if (!b || b->cap - b->used < n) {
        /* Big requests get a block of their own, so a large array does not waste a partly used
         * block and the usual small allocations keep filling the current one. */
        size_t cap = n > OT_ARENA_BLOCK / 4 ? n : OT_ARENA_BLOCK;
        struct ot_arena_block *nb = malloc(sizeof(*nb) + cap);
        if (!nb)
            return NULL;
        nb->used = 0;
        nb->cap = cap;
        if (b && n > OT_ARENA_BLOCK / 4) {
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            a->head = nb;
        }
        b = nb;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    a->total += n;
    return p;
}

void *ot_arena_alloc(struct ot_arena *a, size_t n)
{
    void *p = ot_arena_take(a, n);
    if (p)
        memset(p, 0, n);
    return p;
}

void *ot_arena_alloc_nz(struct ot_arena *a, size_t n)
{
    return ot_arena_take(a, n);
}

void *ot_arena_array(struct ot_arena *a, size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size)
        return NULL;
    return ot_arena_alloc(a, count * size);
}

char *ot_arena_strdup(struct ot_arena *a, const char *s, size_t n)
{
    char *d = ot_arena_alloc(a, n + 1);
    if (d && n)
        memcpy(d, s, n);
    return d;
}

struct ot_arena_adopted {
    struct ot_arena_adopted *next;
    void *p;
};

int ot_arena_adopt(struct ot_arena *a, void *p)
{
    struct ot_arena_adopted *n = ot_arena_alloc(a, sizeof(*n));
    if (!n)
        return -1;
    n->p = p;
    n->next = a->adopted;
    a->adopted = n;
    return 0;
}

void ot_arena_free(struct ot_arena *a)
{
    /* Adopted buffers are listed in nodes that live in the blocks, so they go first. */
    for (struct ot_arena_adopted *n = a->adopted; n; n = n->next)
        free(n->p);
    a->adopted = NULL;
    struct ot_arena_block *b = a->head;
    while (b) {
        struct ot_arena_block *next = b->next;
        free(b);
        b = next;
    }
    a->head = NULL;
    a->total = 0;
}

/* ---- u64 map ---- */

static inline size_t ot_hash64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return (size_t)x;
}

int ot_u64map_init(struct ot_u64map *m, size_t expected)
{
    size_t cap = 16;
    while (cap < expected * 2 && cap < ((size_t)1 << 40))
        cap <<= 1;
    m->keys = malloc(cap * sizeof(*m->keys));
    m->vals = malloc(cap * sizeof(*m->vals));
    if (!m->keys || !m->vals) {
        free(m->keys);
        free(m->vals);
        memset(m, 0, sizeof(*m));
        return -1;
    }
    memset(m->vals, 0xff, cap * sizeof(*m->vals));
    m->cap = cap;
    m->count = 0;
    return 0;
}

static int ot_u64map_grow(struct ot_u64map *m)
{
    struct ot_u64map n;
    if (ot_u64map_init(&n, m->cap) < 0)
        return -1;
    for (size_t i = 0; i < m->cap; i++)
        if (m->vals[i] != OT_U64MAP_NONE)
            ot_u64map_put(&n, m->keys[i], m->vals[i]);
    ot_u64map_free(m);
    *m = n;
    return 0;
}

uint32_t ot_u64map_put(struct ot_u64map *m, uint64_t key, uint32_t val)
{
    if (!m->cap && ot_u64map_init(m, 8) < 0)
        return OT_U64MAP_NONE;
    if ((m->count + 1) * 4 > m->cap * 3 && ot_u64map_grow(m) < 0)
        return OT_U64MAP_NONE;
    size_t mask = m->cap - 1;
    for (size_t i = ot_hash64(key) & mask;; i = (i + 1) & mask) {
        if (m->vals[i] == OT_U64MAP_NONE) {
            m->keys[i] = key;
            m->vals[i] = val;
            m->count++;
            return val;
        }
        if (m->keys[i] == key)
            return m->vals[i];
    }
}

uint32_t ot_u64map_get(const struct ot_u64map *m, uint64_t key)
{
    if (!m->cap)
        return OT_U64MAP_NONE;
    size_t mask = m->cap - 1;
    for (size_t i = ot_hash64(key) & mask;; i = (i + 1) & mask) {
        if (m->vals[i] == OT_U64MAP_NONE)
            return OT_U64MAP_NONE;
        if (m->keys[i] == key)
            return m->vals[i];
    }
}

void ot_u64map_free(struct ot_u64map *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof(*m));
}

/* ---- UTF-8 and safe output ---- */

size_t ot_utf8_len(const unsigned char *p, size_t n)
{
    if (n == 0)
        return 0;
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    size_t len;
    uint32_t cp, min;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2, cp = c & 0x1f, min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3, cp = c & 0x0f, min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4, cp = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

void ot_fput_safe_max(FILE *f, struct ot_str s, size_t max_bytes)
{
    const unsigned char *p = (const unsigned char *)s.p;
    size_t n = s.p ? s.n : 0, i = 0;
    bool cut = false;
    if (n > max_bytes) {
        n = max_bytes;
        cut = true;
    }
    while (i < n) {
        unsigned c = p[i];
        if (c >= 0x20 && c < 0x7f && c != '\\') {
            size_t j = i;
            while (j < n && p[j] >= 0x20 && p[j] < 0x7f && p[j] != '\\')
                j++;
            fwrite(p + i, 1, j - i, f);
            i = j;
            continue;
        }
        if (c == '\\') { /* doubled, so that a literal "\x1b" cannot pass for an escape */
            fputs("\\\\", f);
            i++;
            continue;
        }
        size_t l = c >= 0x80 ? ot_utf8_len(p + i, n - i) : 0;
        if (l) {
            /* C1 controls (U+0080..U+009F) can act as terminal escapes too. */
            if (l == 2 && c == 0xc2 && p[i + 1] < 0xa0)
                l = 0;
        }
        if (l) {
            fwrite(p + i, 1, l, f);
            i += l;
        } else {
            fprintf(f, "\\x%02x", c);
            i++;
        }
    }
    if (cut)
        fputs("...", f);
}

void ot_fput_safe(FILE *f, struct ot_str s)
{
    ot_fput_safe_max(f, s, SIZE_MAX);
}

/* ---- formatting ---- */

const char *ot_fmt_bytes(char *buf, uint64_t v)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (v < 1024) {
        snprintf(buf, 32, "%llu B", (unsigned long long)v);
        return buf;
    }
    double d = (double)v;
    int u = -1;
    while (d >= 1024.0 && u < 5) {
        d /= 1024.0;
        u++;
    }
    snprintf(buf, 32, d >= 100 ? "%.0f %s" : d >= 10 ? "%.1f %s" : "%.2f %s", d, units[u]);
    return buf;
}

const char *ot_fmt_count(char *buf, uint64_t v)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)v);
    int o = 0;
    for (int i = 0; i < n; i++) {
        if (i && (n - i) % 3 == 0)
            buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = 0;
    return buf;
}

const char *ot_fmt_reltime(char *buf, uint64_t t_ns, uint64_t base_ns)
{
    if (!t_ns || !base_ns) {
        snprintf(buf, 48, "?");
        return buf;
    }
    double s = t_ns >= base_ns ? (double)(t_ns - base_ns) / 1e9 : -(double)(base_ns - t_ns) / 1e9;
    snprintf(buf, 48, "%+.3f s", s);
    return buf;
}

/* ---- notes ---- */

void ot_note(struct ot_notes *n, const char *fmt, ...)
{
    if (n->n == n->cap) {
        size_t cap = n->cap ? n->cap * 2 : 8;
        char **v = realloc(n->v, cap * sizeof(*v));
        if (!v)
            return;
        n->v = v;
        n->cap = cap;
    }
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) >= 0)
        n->v[n->n++] = s;
    va_end(ap);
}

void ot_notes_free(struct ot_notes *n)
{
    for (size_t i = 0; i < n->n; i++)
        free(n->v[i]);
    free(n->v);
    memset(n, 0, sizeof(*n));
}

bool ot_fput_markup(FILE *f, struct ot_str s, size_t max_bytes, const char *bad_fmt,
                    void (*ascii)(FILE *f, unsigned c, void *ctx), void *ctx)
{
    const unsigned char *p = (const unsigned char *)s.p;
    size_t n = max_bytes && s.n > max_bytes ? max_bytes : s.n;
    for (size_t i = 0; i < n;) {
        unsigned c = p[i];
        if (c >= 0x80) {
            size_t k = ot_utf8_len(p + i, s.n - i);
            if (k && i + k <= n) {
                fwrite(p + i, 1, k, f);
                i += k;
                continue;
            }
            if (k) /* a sequence cut by max_bytes: stop before it */
                break;
            fprintf(f, bad_fmt, c);
            i++;
            continue;
        }
        ascii(f, c, ctx);
        i++;
    }
    return n < s.n;
}

const char *ot_fmt_wall(char *buf, uint64_t wall_ns)
{
    time_t secs = (time_t)(wall_ns / 1000000000u);
    struct tm tm;
    if (!wall_ns || !gmtime_r(&secs, &tm) || !strftime(buf, 64, "%Y-%m-%d %H:%M:%S UTC", &tm))
        return NULL;
    return buf;
}

void ot_strv_free(char **v, size_t n)
{
    if (!v)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

int ot_mem_cmp(const void *a, size_t na, const void *b, size_t nb)
{
    size_t n = na < nb ? na : nb;
    int c = n ? memcmp(a, b, n) : 0;
    if (c)
        return c;
    return na == nb ? 0 : na < nb ? -1 : 1;
}

size_t ot_lower_bound_u64(const void *base, size_t n, size_t elem_size, size_t key_off, uint64_t key)
{
    const unsigned char *p = base;
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        uint64_t k;
        memcpy(&k, p + mid * elem_size + key_off, sizeof(k));
        if (k < key)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

struct ot_str ot_base_name(struct ot_str p)
{
    if (!p.p)
        return p;
    size_t start = 0;
    for (size_t i = 0; i < p.n; i++)
        if (p.p[i] == '/')
            start = i + 1;
    return (struct ot_str){p.p + start, p.n - start};
}
