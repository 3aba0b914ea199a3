/* "Why": short statements that explain an out-of-memory (or a peak), each built only from numbers the
 * snapshot measured, each carrying those numbers. Nothing is said when the data for it is not there.
 *
 * The kinds are listed in why/kinds.c (ot_why_kinds, ot_remedy_kinds); docs/JSON.md gives their numbers. */
#ifndef OT_READ_WHY_H
#define OT_READ_WHY_H

#include "analyze/analysis.h"

#define OT_WHY_MAX_ITEMS 16
/* A statement's numbers: growing_site has up to 30 (with windows, and two more sites named). */
#define OT_WHY_MAX_NUMBERS 32

enum ot_why_numkind { OT_WHY_U64, OT_WHY_I64, OT_WHY_F64 };

struct ot_why_number {
    const char *key; /* static string */
    enum ot_why_numkind kind;
    uint64_t u;
    int64_t i;
    double f;
};

struct ot_why_item {
    const char *kind; /* static string */
    char *text;       /* one sentence, safe to print (untrusted bytes escaped) */
    size_t nnum;
    struct ot_why_number num[OT_WHY_MAX_NUMBERS];
};

struct ot_why {
    size_t n;
    struct ot_why_item v[OT_WHY_MAX_ITEMS];
    int64_t device;  /* the device the statements are about (the failing one, else the leading peak's) */
    bool has_device;
    bool earlier_read; /* a statement read an earlier view (s->fw_earlier): JAX's preallocation and limit */
};

/* One kind of statement and when it is made, in a line (why/kinds.c): --help prints these lists. */
struct ot_why_kind {
    const char *kind;
    const char *says;
};
extern const struct ot_why_kind ot_why_kinds[], ot_remedy_kinds[];
extern const size_t ot_why_nkinds, ot_remedy_nkinds;

/* Builds the statements for an analysis (called by ot_analyze, once the rest of it is built). Returns NULL only when out of memory. */
struct ot_why *ot_why_new(const struct ot_analysis *a);
void ot_why_free(struct ot_why *w);

/* Does a statement name the marker at this seq (why/cited.c)? The seq must be a marker's. */
bool ot_why_cites_marker(const struct ot_why *w, uint64_t seq);

/* "What to try" (why/remedies.c): the remedies whose numbers this snapshot supports, as statements of
 * the same shape (kinds listed there). Built after the statements. NULL only when out of memory. */
struct ot_why *ot_remedies_new(const struct ot_analysis *a);

#endif
