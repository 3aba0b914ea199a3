#include "analyze/moment.h"

#include <string.h>

const char *ot_at_name(enum ot_at at)
{
    switch (at) {
    case OT_AT_FAILURE:
        return "failure";
    case OT_AT_LIVE:
        return "live";
    default:
        return "peak";
    }
}

void ot_moment_of(const struct ot_analysis *a, enum ot_at at, enum ot_at dflt, struct ot_moment *m)
{
    const struct ot_snapshot *s = a->s;
    memset(m, 0, sizeof(*m));
    if (at == OT_AT_DEFAULT)
        at = dflt == OT_AT_DEFAULT ? OT_AT_PEAK : dflt;
    m->asked = at;
    if (at == OT_AT_PEAK && a->peak && a->peak->has_sites) {
        m->at = OT_AT_PEAK;
        m->sites = &a->peak->sites;
        m->whole = a->peak->bytes;
        m->device = a->peak->device;
        m->time_ns = a->peak->time_ns;
        m->seq = m->last_seq = a->peak->seq;
        m->recs = a->peak->section->recs;
        m->nrecs = a->peak->section->count;
        return;
    }
    if (at == OT_AT_FAILURE && a->has_at_failure) {
        m->at = OT_AT_FAILURE;
        m->sites = &a->at_failure;
        m->whole = a->at_failure.bytes;
        m->device = a->failure_device;
        m->time_ns = s->failure.time_ns;
        m->seq = m->last_seq = s->failure.seq;
        m->recs = s->live;
        m->nrecs = s->nlive;
        return;
    }
    m->fell_back = at != OT_AT_LIVE;
    m->at = OT_AT_LIVE;
    m->any_device = true;
    m->sites = s->has_live ? &a->live : NULL;
    m->whole = a->live.bytes;
    m->time_ns = s->meta.mono_ns;
    m->last_seq = UINT64_MAX;
    m->recs = s->live;
    m->nrecs = s->has_live ? s->nlive : 0;
}

void ot_moment_tables(const struct ot_analysis *a, enum ot_at at, struct ot_moment_tables *t)
{
    t->peak = at == OT_AT_DEFAULT || at == OT_AT_PEAK;
    t->failure = (at == OT_AT_DEFAULT || at == OT_AT_FAILURE) && a->has_at_failure;
    t->failure_missing = at == OT_AT_FAILURE && !a->has_at_failure;
    t->live = (at == OT_AT_DEFAULT && !a->has_at_failure) || at == OT_AT_LIVE || t->failure_missing;
}
