#include "render/json_writer.h"

#include <inttypes.h>
#include <math.h>

void ot_json_init(struct ot_json *j, FILE *f)
{
    j->f = f;
    j->depth = 0;
    j->first[0] = true;
}

/* Reports run to megabytes of JSON: the writer uses stdio's unlocked calls (one thread writes). */
#define fputc putc_unlocked
#define fwrite fwrite_unlocked
#define fputs fputs_unlocked

static void indent(struct ot_json *j)
{
    static const char spaces[2 * OT_JSON_MAX_DEPTH + 1] =
        "\n                                                                ";
    fwrite(spaces, 1, 1 + 2 * (size_t)j->depth, j->f);
}

static void put_string(FILE *f, const char *p, size_t n)
{
    const unsigned char *s = (const unsigned char *)p;
    fputc('"', f);
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            size_t k = i;
            while (k < n && s[k] >= 0x20 && s[k] < 0x80 && s[k] != '"' && s[k] != '\\')
                k++;
            fwrite(s + i, 1, k - i, f);
            i = k;
            continue;
        }
        switch (c) {
        case '"':
            fputs("\\\"", f);
            i++;
            continue;
        case '\\':
            fputs("\\\\", f);
            i++;
            continue;
        case '\n':
            fputs("\\n", f);
            i++;
            continue;
        case '\r':
            fputs("\\r", f);
            i++;
            continue;
        case '\t':
            fputs("\\t", f);
            i++;
            continue;
        default:
            break;
        }
        if (c < 0x20) {
            fprintf(f, "\\u%04x", c);
            i++;
            continue;
        }
        size_t l = ot_utf8_len(s + i, n - i);
        if (l) {
            fwrite(s + i, 1, l, f);
            i += l;
        } else {
            fputs("\\ufffd", f); /* one replacement per invalid byte */
            i++;
        }
    }
    fputc('"', f);
}

/* Comma, newline and "key": before a value. */
static void member(struct ot_json *j, const char *key)
{
    if (j->depth > 0) {
        if (!j->first[j->depth])
            fputc(',', j->f);
        j->first[j->depth] = false;
        indent(j);
    }
    if (key) {
        put_string(j->f, key, strlen(key));
        fputs(": ", j->f);
    }
}

static void open_(struct ot_json *j, const char *key, char c)
{
    member(j, key);
    fputc(c, j->f);
    if (j->depth < OT_JSON_MAX_DEPTH - 1)
        j->depth++;
    j->first[j->depth] = true;
}

static void close_(struct ot_json *j, char c)
{
    bool empty = j->first[j->depth];
    if (j->depth > 0)
        j->depth--;
    if (!empty)
        indent(j);
    fputc(c, j->f);
}

void ot_json_obj(struct ot_json *j, const char *key)
{
    open_(j, key, '{');
}

void ot_json_obj_end(struct ot_json *j)
{
    close_(j, '}');
}

void ot_json_arr(struct ot_json *j, const char *key)
{
    open_(j, key, '[');
}

void ot_json_arr_end(struct ot_json *j)
{
    close_(j, ']');
}

void ot_json_null(struct ot_json *j, const char *key)
{
    member(j, key);
    fputs("null", j->f);
}

void ot_json_bool(struct ot_json *j, const char *key, bool v)
{
    member(j, key);
    fputs(v ? "true" : "false", j->f);
}

void ot_json_u64(struct ot_json *j, const char *key, uint64_t v)
{
    member(j, key);
    fprintf(j->f, "%" PRIu64, v);
}

void ot_json_i64(struct ot_json *j, const char *key, int64_t v)
{
    member(j, key);
    fprintf(j->f, "%" PRId64, v);
}

void ot_json_f64(struct ot_json *j, const char *key, double v)
{
    member(j, key);
    if (isfinite(v))
        fprintf(j->f, "%.6g", v);
    else
        fputs("null", j->f);
}

void ot_json_str(struct ot_json *j, const char *key, struct ot_str s)
{
    member(j, key);
    if (s.p)
        put_string(j->f, s.p, s.n);
    else
        fputs("null", j->f);
}

void ot_json_cstr(struct ot_json *j, const char *key, const char *s)
{
    ot_json_str(j, key, ot_cstr(s));
}

void ot_json_u64_or_null(struct ot_json *j, const char *key, bool known, uint64_t v)
{
    if (known)
        ot_json_u64(j, key, v);
    else
        ot_json_null(j, key);
}

void ot_json_i64_or_null(struct ot_json *j, const char *key, bool known, int64_t v)
{
    if (known)
        ot_json_i64(j, key, v);
    else
        ot_json_null(j, key);
}

void ot_json_end(struct ot_json *j)
{
    fputc('\n', j->f);
}
