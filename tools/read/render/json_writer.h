/* A streaming JSON writer: correct escaping (control characters, invalid UTF-8 -> U+FFFD), commas
 * and indentation handled here so the report code reads as a list of fields. Every value function takes
 * the member name, or NULL inside an array. */
#ifndef OT_READ_JSON_WRITER_H
#define OT_READ_JSON_WRITER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "model/util.h"

#define OT_JSON_MAX_DEPTH 32

struct ot_json {
    FILE *f;
    int depth;
    bool first[OT_JSON_MAX_DEPTH]; /* no member written yet at this depth */
};

void ot_json_init(struct ot_json *j, FILE *f);
void ot_json_obj(struct ot_json *j, const char *key);
void ot_json_obj_end(struct ot_json *j);
void ot_json_arr(struct ot_json *j, const char *key);
void ot_json_arr_end(struct ot_json *j);
void ot_json_null(struct ot_json *j, const char *key);
void ot_json_bool(struct ot_json *j, const char *key, bool v);
void ot_json_u64(struct ot_json *j, const char *key, uint64_t v);
void ot_json_i64(struct ot_json *j, const char *key, int64_t v);
void ot_json_f64(struct ot_json *j, const char *key, double v); /* 6 significant digits */
void ot_json_str(struct ot_json *j, const char *key, struct ot_str s); /* p == NULL -> null */
void ot_json_cstr(struct ot_json *j, const char *key, const char *s);  /* NULL -> null */
/* Convenience: a number when known, else null. */
void ot_json_u64_or_null(struct ot_json *j, const char *key, bool known, uint64_t v);
void ot_json_i64_or_null(struct ot_json *j, const char *key, bool known, int64_t v);
void ot_json_end(struct ot_json *j); /* final newline */

#endif
