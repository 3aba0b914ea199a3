/* A streaming writer of Python pickles (protocol 2) holding only plain values: dicts, lists, 2-tuples,
 * str, int, float, bool and None. No class or global is ever referenced, so loading the output runs no
 * code. Lists and interned strings may be memoized (BINPUT) and referenced again (BINGET), which is
 * how a frame list shared by many entries is written once.
 *
 * Large containers are written in batches of 1000 items per MARK, as Python's own pickler does, so a
 * loader's stack stays small (PyTorch's memory_viz page spreads one batch into a function call).
 *
 * Usage: ot_pk_begin; values; ot_pk_end. Inside a dict, write a key then its value. */
#ifndef OT_READ_PICKLE_H
#define OT_READ_PICKLE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "model/util.h"

#define OT_PK_MAX_DEPTH 16
#define OT_PK_INTERN 64

struct ot_pickle {
    FILE *f;
    uint32_t next_memo;
    int depth;
    size_t items[OT_PK_MAX_DEPTH]; /* values written since the container's last MARK */
    unsigned char kind[OT_PK_MAX_DEPTH]; /* list, dict or tuple */
    /* Interned strings (keys, action names): written once, then fetched from the memo. */
    size_t ninterned;
    const char *interned[OT_PK_INTERN];
    uint32_t interned_memo[OT_PK_INTERN];
};

void ot_pk_begin(struct ot_pickle *p, FILE *f);
void ot_pk_end(struct ot_pickle *p); /* STOP */

void ot_pk_dict(struct ot_pickle *p);
void ot_pk_dict_end(struct ot_pickle *p);
void ot_pk_list(struct ot_pickle *p);
void ot_pk_list_end(struct ot_pickle *p);
/* The two values written before it become one tuple (they count as one item of the container). Call
 * ot_pk_tuple2_begin before the first of them. */
void ot_pk_tuple2_begin(struct ot_pickle *p);
void ot_pk_tuple2_end(struct ot_pickle *p);

void ot_pk_none(struct ot_pickle *p);
void ot_pk_bool(struct ot_pickle *p, bool v);
void ot_pk_i64(struct ot_pickle *p, int64_t v);
void ot_pk_u64(struct ot_pickle *p, uint64_t v);
void ot_pk_f64(struct ot_pickle *p, double v);
/* Strings are written as UTF-8; bytes that are not valid UTF-8 become U+FFFD. Unknown (p == NULL)
 * writes None. */
void ot_pk_str(struct ot_pickle *p, struct ot_str s);
void ot_pk_cstr(struct ot_pickle *p, const char *s);
/* A string literal with static lifetime, memoized after its first use. */
void ot_pk_istr(struct ot_pickle *p, const char *s);

/* Ends a list and memoizes it: the id for ot_pk_memo_get. */
uint32_t ot_pk_list_end_memo(struct ot_pickle *p);
/* Writes a reference to a memoized value (it counts as one item). */
void ot_pk_memo_get(struct ot_pickle *p, uint32_t id);

/* A dict member: the key (interned), then its value. */
void ot_pk_key_u64(struct ot_pickle *p, const char *key, uint64_t v);
void ot_pk_key_i64(struct ot_pickle *p, const char *key, int64_t v);
void ot_pk_key_istr(struct ot_pickle *p, const char *key, const char *v);

#endif
