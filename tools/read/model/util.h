/* Small building blocks shared by the reader: sized strings, an arena, a u64 hash map, byte buffers and
 * output helpers that keep untrusted bytes from reaching a terminal raw. */
#ifndef OT_READ_UTIL_H
#define OT_READ_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* A byte string that is not NUL-terminated. Snapshot strings may hold any byte, NUL included, so the
 * reader never treats them as C strings. p == NULL means "unknown" (distinct from the empty string). */
struct ot_str {
    const char *p;
    size_t n;
};

static inline struct ot_str ot_cstr(const char *s)
{
    return (struct ot_str){s, s ? strlen(s) : 0};
}

static inline bool ot_str_known(struct ot_str s)
{
    return s.p != NULL;
}

/* s starts with pre / holds needle somewhere (false for unknown strings). */
static inline bool ot_str_starts(struct ot_str s, const char *pre)
{
    size_t n = strlen(pre);
    return s.p && s.n >= n && memcmp(s.p, pre, n) == 0;
}

static inline bool ot_str_contains(struct ot_str s, const char *needle)
{
    size_t n = strlen(needle);
    if (!s.p || s.n < n)
        return false;
    for (size_t i = 0; i + n <= s.n; i++)
        if (memcmp(s.p + i, needle, n) == 0)
            return true;
    return false;
}

static inline bool ot_str_eq(struct ot_str a, const char *b)
{
    size_t n = strlen(b);
    return a.p && a.n == n && memcmp(a.p, b, n) == 0;
}

/* Everything parsed from one snapshot lives in one arena, so that freeing a model is one call and a
 * parse that fails half way leaks nothing. */
struct ot_arena_block;
struct ot_arena_adopted;
struct ot_arena {
    struct ot_arena_block *head;
    struct ot_arena_adopted *adopted; /* malloc'd buffers freed with the arena */
    size_t total; /* bytes handed out */
    size_t limit; /* when nonzero, a request that would take total past it is refused (over_limit set) */
    bool over_limit;
};

void *ot_arena_alloc(struct ot_arena *a, size_t n);                 /* zeroed; NULL when out of memory */
void *ot_arena_alloc_nz(struct ot_arena *a, size_t n);              /* not zeroed: for big buffers */
void *ot_arena_array(struct ot_arena *a, size_t count, size_t size); /* NULL on overflow or OOM */
char *ot_arena_strdup(struct ot_arena *a, const char *s, size_t n);  /* NUL-terminated copy */
int ot_arena_adopt(struct ot_arena *a, void *p); /* frees p with the arena; -1 (p not adopted) on OOM */
void ot_arena_free(struct ot_arena *a);

/* Byte strings in order: memcmp over the shorter, then the shorter first (0 when equal). */
int ot_mem_cmp(const void *a, size_t na, const void *b, size_t nb);

/* Frees n malloc'd strings and the malloc'd array holding them; NULL is fine. */
void ot_strv_free(char **v, size_t n);

/* Open-addressing map from u64 keys to u32 values (indexes into an array). */
struct ot_u64map {
    uint64_t *keys;
    uint32_t *vals; /* UINT32_MAX marks an empty slot */
    size_t cap;     /* power of two */
    size_t count;
};

#define OT_U64MAP_NONE UINT32_MAX

int ot_u64map_init(struct ot_u64map *m, size_t expected); /* -1 when out of memory */
/* Inserts key -> val unless present; returns the value now stored (the old one when present),
 * or OT_U64MAP_NONE when out of memory. */
uint32_t ot_u64map_put(struct ot_u64map *m, uint64_t key, uint32_t val);
uint32_t ot_u64map_get(const struct ot_u64map *m, uint64_t key);
void ot_u64map_free(struct ot_u64map *m);

/* Length of the valid UTF-8 sequence at p (1-4), or 0 when the bytes there are not valid UTF-8
 * (overlongs, surrogates and code points past U+10FFFF count as invalid). */
size_t ot_utf8_len(const unsigned char *p, size_t n);

/* Writes untrusted bytes for a markup format: valid UTF-8 sequences pass unchanged, other bytes of 0x80 and
 * above are written with bad_fmt (a printf format taking the byte), and each ASCII byte goes to ascii(),
 * which escapes what the format needs. At most max_bytes (0: all) are written, never cutting a UTF-8
 * sequence. Returns true when s was cut short (the caller marks it). */
bool ot_fput_markup(FILE *f, struct ot_str s, size_t max_bytes, const char *bad_fmt,
                    void (*ascii)(FILE *f, unsigned c, void *ctx), void *ctx);

/* Writes untrusted bytes for a human: valid UTF-8 passes, control characters and invalid bytes are
 * shown as \xNN (and a backslash as \\) so that a hostile snapshot cannot drive the terminal. */
void ot_fput_safe(FILE *f, struct ot_str s);
void ot_fput_safe_max(FILE *f, struct ot_str s, size_t max_bytes); /* "..." past max_bytes */

/* The last component of a path ("libcudart.so.13" for "/usr/local/cuda/lib64/libcudart.so.13"). */
struct ot_str ot_base_name(struct ot_str path);

/* "1.50 GiB"; buf needs 32 bytes. */
const char *ot_fmt_bytes(char *buf, uint64_t v);
/* "12,345,678"; buf needs 32 bytes. */
const char *ot_fmt_count(char *buf, uint64_t v);
/* "+12.345 s" relative to a base time; buf needs 48 bytes. Unknown (either 0) gives "?". */
const char *ot_fmt_reltime(char *buf, uint64_t t_ns, uint64_t base_ns);
/* CLOCK_REALTIME ns as "YYYY-MM-DD HH:MM:SS UTC" in buf (64 bytes); NULL when unknown (0) or unrepresentable. */
const char *ot_fmt_wall(char *buf, uint64_t wall_ns);

static inline uint64_t ot_sat_add(uint64_t a, uint64_t b)
{
    uint64_t r = a + b;
    return r < a ? UINT64_MAX : r;
}

/* -1, 0 or 1 as a is below, equal to or above b: one key of a qsort comparison. */
static inline int ot_cmp_u64(uint64_t a, uint64_t b)
{
    return (a > b) - (a < b);
}

/* Notes collected while analysing: inconsistencies that do not make the file unreadable. */
struct ot_notes {
    char **v;
    size_t n, cap;
};
void ot_note(struct ot_notes *n, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ot_notes_free(struct ot_notes *n);

/* In n elements of elem_size bytes sorted by the uint64_t key at key_off in each: the index of the first
 * whose key is >= key, n when none. */
size_t ot_lower_bound_u64(const void *base, size_t n, size_t elem_size, size_t key_off, uint64_t key);

#endif
