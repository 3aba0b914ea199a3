/* The "breakdown" object (docs/JSON.md, breakdown): what held the memory, as the report and the merged
 * view of a run (each rank's) both write it. */
#include "render/json_breakdown.h"

static void bd_moment(struct ot_json *j, const char *key, const struct ot_breakdown *b, const struct ot_bd_moment *m)
{
    if (!m->known) {
        ot_json_null(j, key);
        return;
    }
    ot_json_obj(j, key);
    ot_json_u64(j, "whole_bytes", m->whole);
    ot_json_arr(j, "rows");
    for (int r = 0; r < OT_BD_NROWS; r++) {
        ot_json_obj(j, NULL);
        ot_json_cstr(j, "category", ot_bd_row_key((enum ot_bd_row)r));
        ot_json_cstr(j, "name", ot_bd_row_name(b, (enum ot_bd_row)r));
        ot_json_u64_or_null(j, "bytes", m->measured[r], m->bytes[r]);
        ot_json_u64(j, "inferred_bytes", m->inferred[r]);
        ot_json_arr(j, "parts");
        for (size_t i = 0; i < m->nparts; i++) {
            if (m->parts[i].row != (enum ot_bd_row)r)
                continue;
            ot_json_obj(j, NULL);
            ot_json_str(j, "label", m->parts[i].label);
            ot_json_u64(j, "bytes", m->parts[i].bytes);
            ot_json_obj_end(j);
        }
        ot_json_arr_end(j);
        ot_json_obj_end(j);
    }
    ot_json_arr_end(j);
    ot_json_obj_end(j);
}

void ot_json_breakdown(struct ot_json *j, const char *key, const struct ot_breakdown *b)
{
    if (!b || !b->has_device) {
        ot_json_null(j, key);
        return;
    }
    ot_json_obj(j, key);
    ot_json_i64(j, "device", b->device);
    ot_json_cstr(j, "first_moment", b->at_failure ? "failure" : "snapshot");
    ot_json_bool(j, "identity", b->identity);
    ot_json_bool(j, "framework_on_stacks", b->framework_seen);
    ot_json_bool(j, "no_model", b->no_model);
    bd_moment(j, "now", b, &b->now);
    bd_moment(j, "peak", b, &b->peak);
    if (b->nothing_held[0])
        ot_json_cstr(j, "nothing_held", b->nothing_held);
    else
        ot_json_null(j, "nothing_held");
    ot_json_obj_end(j);
}
