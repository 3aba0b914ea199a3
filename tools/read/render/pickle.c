#include "render/pickle.h"

#include <string.h>

/* Opcodes (Lib/pickletools.py). Only these are ever written. */
#define PK_PROTO 0x80
#define PK_STOP '.'
#define PK_MARK '('
#define PK_EMPTY_DICT '}'
#define PK_EMPTY_LIST ']'
#define PK_SETITEMS 'u'
#define PK_APPENDS 'e'
#define PK_TUPLE2 0x86
#define PK_NONE 'N'
#define PK_NEWTRUE 0x88
#define PK_NEWFALSE 0x89
#define PK_BININT 'J'
#define PK_BININT1 'K'
#define PK_BININT2 'M'
#define PK_LONG1 0x8a
#define PK_BINFLOAT 'G'
#define PK_BINUNICODE 'X'
#define PK_BINPUT 'q'
#define PK_LONG_BINPUT 'r'
#define PK_BINGET 'h'
#define PK_LONG_BINGET 'j'

#define PK_BATCH 1000

enum { LV_LIST, LV_DICT, LV_TUPLE };

static void op(struct ot_pickle *p, int c)
{
    putc_unlocked(c, p->f);
}

static void u32le(struct ot_pickle *p, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)v, (unsigned char)(v >> 8), (unsigned char)(v >> 16), (unsigned char)(v >> 24)};
    fwrite(b, 1, 4, p->f);
}

/* One value is complete at the current level: batch when a container's MARK holds enough. */
static void item(struct ot_pickle *p)
{
    if (p->depth <= 0)
        return;
    int d = p->depth - 1;
    p->items[d]++;
    if (p->kind[d] == LV_TUPLE)
        return;
    bool dict = p->kind[d] == LV_DICT;
    if (p->items[d] >= (dict ? 2 * PK_BATCH : PK_BATCH)) {
        op(p, dict ? PK_SETITEMS : PK_APPENDS);
        op(p, PK_MARK);
        p->items[d] = 0;
    }
}

void ot_pk_begin(struct ot_pickle *p, FILE *f)
{
    memset(p, 0, sizeof(*p));
    p->f = f;
    op(p, PK_PROTO);
    op(p, 2);
}

void ot_pk_end(struct ot_pickle *p)
{
    op(p, PK_STOP);
}

static void open_level(struct ot_pickle *p, int kind)
{
    if (p->depth >= OT_PK_MAX_DEPTH)
        return; /* a programming error; the nesting used here is fixed and shallow */
    p->kind[p->depth] = (unsigned char)kind;
    p->items[p->depth] = 0;
    p->depth++;
}

void ot_pk_dict(struct ot_pickle *p)
{
    op(p, PK_EMPTY_DICT);
    op(p, PK_MARK);
    open_level(p, LV_DICT);
}

void ot_pk_list(struct ot_pickle *p)
{
    op(p, PK_EMPTY_LIST);
    op(p, PK_MARK);
    open_level(p, LV_LIST);
}

static uint32_t memo_put(struct ot_pickle *p);

/* The memo entry, when wanted, is written before the item is counted: a batch boundary writes a MARK,
 * after which the loader's stack top is no longer the value. */
static uint32_t close_level(struct ot_pickle *p, int closer, bool memo)
{
    if (p->depth <= 0)
        return 0;
    p->depth--;
    op(p, closer);
    uint32_t id = memo ? memo_put(p) : 0;
    item(p);
    return id;
}

void ot_pk_dict_end(struct ot_pickle *p)
{
    close_level(p, PK_SETITEMS, false);
}

void ot_pk_list_end(struct ot_pickle *p)
{
    close_level(p, PK_APPENDS, false);
}

uint32_t ot_pk_list_end_memo(struct ot_pickle *p)
{
    return close_level(p, PK_APPENDS, true);
}

void ot_pk_tuple2_begin(struct ot_pickle *p)
{
    open_level(p, LV_TUPLE);
}

void ot_pk_tuple2_end(struct ot_pickle *p)
{
    close_level(p, PK_TUPLE2, false);
}

void ot_pk_none(struct ot_pickle *p)
{
    op(p, PK_NONE);
    item(p);
}

void ot_pk_bool(struct ot_pickle *p, bool v)
{
    op(p, v ? PK_NEWTRUE : PK_NEWFALSE);
    item(p);
}

void ot_pk_i64(struct ot_pickle *p, int64_t v)
{
    if (v >= 0 && v < 256) {
        op(p, PK_BININT1);
        op(p, (int)v);
    } else if (v >= 0 && v < 65536) {
        op(p, PK_BININT2);
        op(p, (int)(v & 0xff));
        op(p, (int)(v >> 8));
    } else if (v >= INT32_MIN && v <= INT32_MAX) {
        op(p, PK_BININT);
        u32le(p, (uint32_t)(int32_t)v);
    } else {
        /* LONG1: the shortest little-endian two's complement that keeps the sign. */
        unsigned char b[8];
        uint64_t u = (uint64_t)v;
        for (int i = 0; i < 8; i++)
            b[i] = (unsigned char)(u >> (8 * i));
        int n = 8;
        while (n > 1 && ((b[n - 1] == 0x00 && !(b[n - 2] & 0x80)) || (b[n - 1] == 0xff && (b[n - 2] & 0x80))))
            n--;
        op(p, PK_LONG1);
        op(p, n);
        fwrite(b, 1, (size_t)n, p->f);
    }
    item(p);
}

void ot_pk_u64(struct ot_pickle *p, uint64_t v)
{
    if (v <= (uint64_t)INT64_MAX) {
        ot_pk_i64(p, (int64_t)v);
        return;
    }
    unsigned char b[9];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(v >> (8 * i));
    b[8] = 0; /* the sign byte: positive */
    op(p, PK_LONG1);
    op(p, 9);
    fwrite(b, 1, 9, p->f);
    item(p);
}

void ot_pk_f64(struct ot_pickle *p, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    unsigned char b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (unsigned char)(u >> (8 * (7 - i))); /* big-endian */
    op(p, PK_BINFLOAT);
    fwrite(b, 1, 8, p->f);
    item(p);
}

static const unsigned char replacement[3] = {0xef, 0xbf, 0xbd}; /* U+FFFD */

void ot_pk_str(struct ot_pickle *p, struct ot_str s)
{
    if (!s.p) {
        ot_pk_none(p);
        return;
    }
    const unsigned char *b = (const unsigned char *)s.p;
    /* The length after replacing invalid bytes, then the bytes. */
    uint64_t len = 0;
    for (size_t i = 0; i < s.n;) {
        size_t k = b[i] < 0x80 ? 1 : ot_utf8_len(b + i, s.n - i);
        len += k ? k : 3;
        i += k ? k : 1;
    }
    if (len > UINT32_MAX) { /* cannot happen for snapshot strings; keep the pickle valid anyway */
        ot_pk_cstr(p, "(string too long)");
        return;
    }
    op(p, PK_BINUNICODE);
    u32le(p, (uint32_t)len);
    size_t i = 0;
    while (i < s.n) {
        size_t run = i;
        while (run < s.n && b[run] < 0x80)
            run++;
        if (run > i) {
            fwrite(b + i, 1, run - i, p->f);
            i = run;
            continue;
        }
        size_t k = ot_utf8_len(b + i, s.n - i);
        if (k) {
            fwrite(b + i, 1, k, p->f);
            i += k;
        } else {
            fwrite(replacement, 1, 3, p->f);
            i++;
        }
    }
    item(p);
}

void ot_pk_cstr(struct ot_pickle *p, const char *s)
{
    ot_pk_str(p, s ? ot_cstr(s) : (struct ot_str){NULL, 0});
}

/* A memo opcode with its id: the one-byte form below 256, else the four-byte one. */
static void memo_op(struct ot_pickle *p, int short_op, int long_op, uint32_t id)
{
    if (id < 256) {
        op(p, short_op);
        op(p, (int)id);
    } else {
        op(p, long_op);
        u32le(p, id);
    }
}

static uint32_t memo_put(struct ot_pickle *p)
{
    uint32_t id = p->next_memo++;
    memo_op(p, PK_BINPUT, PK_LONG_BINPUT, id);
    return id;
}

void ot_pk_memo_get(struct ot_pickle *p, uint32_t id)
{
    memo_op(p, PK_BINGET, PK_LONG_BINGET, id);
    item(p);
}

void ot_pk_istr(struct ot_pickle *p, const char *s)
{
    for (size_t i = 0; i < p->ninterned; i++)
        if (p->interned[i] == s) {
            ot_pk_memo_get(p, p->interned_memo[i]);
            return;
        }
    /* Memoized before the item is counted (see close_level). */
    size_t len = strlen(s);
    op(p, PK_BINUNICODE);
    u32le(p, (uint32_t)len);
    fwrite(s, 1, len, p->f);
    if (p->ninterned < OT_PK_INTERN) {
        p->interned[p->ninterned] = s;
        p->interned_memo[p->ninterned++] = memo_put(p);
    }
    item(p);
}

void ot_pk_key_u64(struct ot_pickle *p, const char *key, uint64_t v)
{
    ot_pk_istr(p, key);
    ot_pk_u64(p, v);
}

void ot_pk_key_i64(struct ot_pickle *p, const char *key, int64_t v)
{
    ot_pk_istr(p, key);
    ot_pk_i64(p, v);
}

void ot_pk_key_istr(struct ot_pickle *p, const char *key, const char *v)
{
    ot_pk_istr(p, key);
    ot_pk_istr(p, v);
}
