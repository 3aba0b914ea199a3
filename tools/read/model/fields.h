/* Reading an item's fields by the format header's field lists (OT_POOL_FIELDS and the like): one loop
 * for every list of the file, so each section's layout is written once, in oomtrace_format.h.
 *
 *     static const struct ot_field pool_fields[] = {OT_POOL_FIELDS(OT_FIELD_OF, struct snap_pool)};
 *
 * A field's member must have its coding's type (U uint64_t, S int64_t, STR struct ot_str): the build
 * refuses anything else. */
#ifndef OT_READ_FIELDS_H
#define OT_READ_FIELDS_H

#include <stddef.h>
#include <stdint.h>

#include "oomtrace_format.h"
#include "model/util.h"

enum ot_field_kind { OT_FIELD_U, OT_FIELD_S, OT_FIELD_STR };

struct ot_field {
    uint32_t off;  /* offsetof the member */
    uint32_t kind; /* enum ot_field_kind */
};

#define OT_FIELD_CTYPE_U uint64_t
#define OT_FIELD_CTYPE_S int64_t
#define OT_FIELD_CTYPE_STR struct ot_str
#define OT_FIELD(type, member, coding)                                                                 \
    {(uint32_t)(offsetof(type, member) +                                                               \
                0 * sizeof(struct {                                                                    \
                    _Static_assert(__builtin_types_compatible_p(__typeof__(((type *)0)->member),       \
                                                                OT_FIELD_CTYPE_##coding),              \
                                   #type "." #member " does not have its coding's type");             \
                    int z;                                                                             \
                })),                                                                                   \
     OT_FIELD_##coding}
/* The X of a field list, its ctx the struct type. */
#define OT_FIELD_OF(type, member, coding, doc) OT_FIELD(type, member, coding),
#define OT_NFIELDS(table) (sizeof(table) / sizeof((table)[0]))

/* Reads the n fields into item, in order. Every field is read even after the cursor failed (c->err),
 * so an error message's position is where the item's last read left the cursor. */
void ot_read_fields(struct ot_cursor *c, void *item, const struct ot_field *f, size_t n);

#endif
