/* Which moment a report describes (--at), resolved once for every report: the peak (its PEAK site
 * table), the failure (the live set of an oom snapshot), or the live set at the snapshot. */
#ifndef OT_READ_MOMENT_H
#define OT_READ_MOMENT_H

#include "analyze/analysis.h"

enum ot_at { OT_AT_DEFAULT, OT_AT_PEAK, OT_AT_FAILURE, OT_AT_LIVE };

/* at == OT_AT_DEFAULT takes dflt (itself OT_AT_DEFAULT: the peak). peak without a PEAK section, or
 * failure without a FAILURE and LIVE section, falls back to the live set at the snapshot; fell_back
 * says so. sites is NULL when even that is unknown (no LIVE section). */
struct ot_moment {
    enum ot_at asked;             /* the moment asked for, the default applied */
    enum ot_at at;                /* what is described, after any fallback */
    bool fell_back;
    const struct ot_sites *sites; /* NULL: unknown */
    uint64_t whole;               /* bytes the shares are of */
    bool any_device;              /* live: all devices */
    int64_t device;               /* peak, failure: the device */
    uint64_t time_ns, seq;        /* peak, failure: when (0 when unknown) */
    const struct ot_record *recs; /* the records the moment is read from: the PEAK section's, else the */
    size_t nrecs;                 /* live set's (every device, every category) */
    uint64_t last_seq;            /* the moment's last event: seq for peak and failure, UINT64_MAX for live */
};
void ot_moment_of(const struct ot_analysis *a, enum ot_at at, enum ot_at dflt, struct ot_moment *m);

/* The text report's site tables: by default the peak and the failure (or, without a failure, the live
 * set); with --at, that one, failure falling back to live (failure_missing). */
struct ot_moment_tables {
    bool peak, failure, live, failure_missing;
};
void ot_moment_tables(const struct ot_analysis *a, enum ot_at at, struct ot_moment_tables *t);

/* "peak", "failure" or "live": for messages. */
const char *ot_at_name(enum ot_at at);

#endif
