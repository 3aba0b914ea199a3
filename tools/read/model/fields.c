/* Reading an item's fields by the format header's field lists. See fields.h. */
#include "model/fields.h"

void ot_read_fields(struct ot_cursor *c, void *item, const struct ot_field *f, size_t n)
{
    char *base = item;
    for (size_t i = 0; i < n; i++) {
        char *at = base + f[i].off;
        if (f[i].kind == OT_FIELD_U) {
            uint64_t v = ot_get_uvarint(c);
            memcpy(at, &v, sizeof v);
        } else if (f[i].kind == OT_FIELD_S) {
            int64_t v = ot_get_svarint(c);
            memcpy(at, &v, sizeof v);
        } else {
            struct ot_str s;
            s.p = ot_get_str(c, &s.n);
            memcpy(at, &s, sizeof s);
        }
    }
}
