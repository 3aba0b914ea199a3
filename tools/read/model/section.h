/* Inside the parser (parse.c and the files of each kind of section): one section's parse context. Every
 * read goes through the bounded cursor of oomtrace_format.h; every error names the section and its file
 * offset, in one line in err. Not for use outside model/. */
#ifndef OT_READ_SECTION_H
#define OT_READ_SECTION_H

#include "model/fields.h"
#include "model/snapshot.h"

struct sec_ctx {
    struct ot_snapshot *snap;
    uint32_t type;
    uint64_t hdr_off;     /* file offset of the section header */
    bool compressed;
    const uint8_t *payload;
    struct ot_cursor c;
    char *err;
    uint64_t sum; /* a total a parser keeps over a list's items */
};

/* What a section holds, in the reports' words: errors name a part by these, never by the format's names. */
const char *ot_part_words(uint32_t type);

/* All return -1, so a parser can `return sec_err(...)`. */
int sec_err(struct sec_ctx *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int sec_over_budget(struct sec_ctx *x, const char *what, ...) __attribute__((format(printf, 2, 3)));
/* The cursor failed inside item `index` of kind `what` (index SIZE_MAX: a field outside any list). */
int sec_item_err(struct sec_ctx *x, const char *what, size_t index);
/* Refuses a count that cannot possibly fit in what is left, before anything is allocated for it. */
int sec_check_count(struct sec_ctx *x, uint64_t count, size_t min_item_bytes, const char *what);

size_t sec_pos(const struct sec_ctx *x);
size_t sec_left(const struct sec_ctx *x);
void *sec_alloc(struct sec_ctx *x, size_t count, size_t size); /* from the snapshot's arena; NULL with err set */
struct ot_str sec_str(struct sec_ctx *x);

/* A list: `uv count`, refused when count items of at least min_item_bytes cannot fit in what is left,
 * then an arena array of count items of size bytes. NULL with err set. */
void *sec_list(struct sec_ctx *x, size_t min_item_bytes, size_t size, const char *what, uint64_t *count);
/* Reads count items of nf fields each into items (size bytes apart). After an item's fields: a failed
 * cursor is item i of `what`'s error; then each (if any) reads the rest of the item or checks it. */
int sec_items(struct sec_ctx *x, void *items, uint64_t count, size_t size, const struct ot_field *f, size_t nf,
              const char *what, int (*each)(struct sec_ctx *x, void *item, size_t i));
/* One item's fields, outside any list; a failed cursor is "<what> field"'s error. */
int sec_fields(struct sec_ctx *x, void *item, const struct ot_field *f, size_t nf, const char *what);

#define U() ot_get_uvarint(&x->c)
#define S() ot_get_svarint(&x->c)
#define STR() sec_str(x)

/* One per section type (sections.c, records.c); each reads x->c and fills x->snap. */
int parse_meta(struct sec_ctx *x);
int parse_devices(struct sec_ctx *x);
int parse_failure(struct sec_ctx *x);
int parse_modules(struct sec_ctx *x);
int parse_symbols(struct sec_ctx *x);
int parse_pyframes(struct sec_ctx *x);
int parse_stacks(struct sec_ctx *x);
int parse_live(struct sec_ctx *x);
int parse_live_seq(struct sec_ctx *x);
int parse_peak(struct sec_ctx *x);
int parse_peak_ref(struct sec_ctx *x);
int parse_events(struct sec_ctx *x);
int parse_markers(struct sec_ctx *x);
int parse_pools(struct sec_ctx *x);
int parse_mappings(struct sec_ctx *x);
int parse_processes(struct sec_ctx *x);
int parse_threads(struct sec_ctx *x);
int parse_framework(struct sec_ctx *x);
int parse_probes(struct sec_ctx *x);
int parse_borrowed(struct sec_ctx *x);
int parse_ctx_freed(struct sec_ctx *x);

/* After the last section: the peak sets of PEAK_REF sections, from the live set. */
int sec_resolve_peak_refs(struct ot_snapshot *s, char *errbuf);
/* After the last section: each borrowed stack's lender, from BORROWED. */
int sec_resolve_borrowed(struct ot_snapshot *s, char *errbuf);

#endif
