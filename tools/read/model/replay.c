#include "model/replay.h"

void ot_replay_seed(struct ot_replay *r, const struct ot_record *rec)
{
    ot_addrmap_set(&r->seeded, rec->address, (struct ot_addrval){rec->stack_id, rec->size});
}

static void step(struct ot_replay *r, const struct snap_event *e);

/* A context's end frees, at its event, every allocation made in the context: each is visited as a free
 * of that moment (api: the call that ended the context), from the list the snapshot keeps (CTX_FREED). */
static void context_end(struct ot_replay *r, const struct snap_event *e)
{
    const struct ot_ctx_end *ce = ot_snapshot_ctx_end(r->s, e->seq);
    for (size_t i = 0; ce && i < ce->n; i++) {
        const struct ot_ctx_freed *f = &ce->v[i];
        struct snap_event fe = {.seq = e->seq, .time_ns = e->time_ns, .kind = OT_EV_FREE, .api = e->api,
                                .category = f->category, .device = f->device, .tid = e->tid,
                                .addr = f->address, .size = f->size};
        step(r, &fe);
    }
}

static void step(struct ot_replay *r, const struct snap_event *e)
{
    struct ot_replay_step st = {.e = e};
    if ((e->kind == OT_EV_ALLOC || e->kind == OT_EV_FREE) && r->track(e, r->ctx)) {
        st.tracked = true;
        if (e->kind == OT_EV_ALLOC) {
            st.matched = ot_addrmap_get(&r->live, e->addr, &st.alloc);
            ot_addrmap_set(&r->live, e->addr, (struct ot_addrval){e->stack_id, e->size});
        } else {
            st.matched = ot_addrmap_take(&r->live, e->addr, &st.alloc) ||
                         ot_addrmap_take(&r->seeded, e->addr, &st.alloc);
        }
    }
    r->visit(&st, r->ctx);
    if (e->kind == OT_EV_CONTEXT_END)
        context_end(r, e);
}

int ot_replay_run(struct ot_replay *r, char errbuf[OT_ERRBUF])
{
    struct ot_event_reader rd;
    ot_event_reader_init(&rd, r->s);
    const struct snap_event *ev;
    size_t n;
    int rc;
    bool done = false;
    while (!done && (rc = ot_event_reader_next(&rd, &ev, &n, errbuf)) > 0) {
        for (size_t i = 0; i < n; i++) {
            if (ev[i].seq > r->last_seq) {
                done = true;
                break;
            }
            step(r, &ev[i]);
        }
    }
    ot_event_reader_free(&rd);
    ot_addrmap_free(&r->live);
    ot_addrmap_free(&r->seeded);
    return !done && rc < 0 ? -1 : 0;
}
