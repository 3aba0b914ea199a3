/* The fuzz target's strict checks of rendered bytes (fuzz_checks.h), written independently of the
 * reader's own escaping so that the two can disagree. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sanitizer/common_interface_defs.h>

#include "fuzz_checks.h"

/* The checks of rendered bytes stay out of coverage: they are not code to explore, and their
 * instrumented comparisons (one per output byte) cost more than the rendering itself. */
#define NOCOV __attribute__((no_sanitize("coverage")))

/* Through the sanitizer's report channel: -close_fd_mask=2 (fuzz.mk) silences the reader's own notes on
 * stderr, and this message must survive it. */
void broken(const char *what, const char *out, size_t len, size_t at)
{
    char msg[1024];
    int n = snprintf(msg, sizeof msg, "fuzz_snapshot: %s at byte %zu of %zu\n  near: ", what, at, len);
    size_t from = at > 80 ? at - 80 : 0, to = at + 80 < len ? at + 80 : len;
    for (size_t i = from; i < to && n > 0 && (size_t)n < sizeof msg - 8; i++) {
        unsigned char c = (unsigned char)out[i];
        n += snprintf(msg + n, sizeof msg - (size_t)n, c >= 0x20 && c < 0x7f ? "%c" : "\\x%02x", c);
    }
    __sanitizer_report_error_summary(msg);
    abort();
}

/* ---- strict checks of the rendered bytes ---- */

/* RFC 3629 UTF-8, written independently of ot_utf8_len so that the two can disagree. */
NOCOV static size_t utf8_seq(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    size_t len;
    unsigned cp;
    if ((c & 0xe0) == 0xc0)
        len = 2, cp = c & 0x1f;
    else if ((c & 0xf0) == 0xe0)
        len = 3, cp = c & 0x0f;
    else if ((c & 0xf8) == 0xf0)
        len = 4, cp = c & 0x07;
    else
        return 0;
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = cp << 6 | (p[i] & 0x3f);
    }
    static const unsigned min[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

/* c1: C1 controls (U+0080..U+009F) count as control characters too; the text report escapes them (they
 * can act as terminal escapes), the other formats escape only C0 and DEL (docs/FORMATS.md). */
NOCOV void check_plain(const char *out, size_t len, bool c1)
{
    const unsigned char *p = (const unsigned char *)out;
    for (size_t i = 0; i < len;) {
        if (p[i] < 0x20 && p[i] != '\n')
            broken("control character", out, len, i);
        if (p[i] == 0x7f)
            broken("DEL", out, len, i);
        size_t l = utf8_seq(p + i, len - i);
        if (!l)
            broken("invalid UTF-8", out, len, i);
        if (c1 && l == 2 && p[i] == 0xc2 && p[i + 1] < 0xa0)
            broken("text report: C1 control character", out, len, i);
        i += l;
    }
}

struct json_in {
    const char *s;
    size_t n, i;
};

NOCOV static void jfail(struct json_in *j, const char *what)
{
    broken(what, j->s, j->n, j->i);
}

NOCOV static void jws(struct json_in *j)
{
    while (j->i < j->n && (j->s[j->i] == ' ' || j->s[j->i] == '\n' || j->s[j->i] == '\t' || j->s[j->i] == '\r'))
        j->i++;
}

NOCOV static int jpeek(struct json_in *j)
{
    return j->i < j->n ? (unsigned char)j->s[j->i] : -1;
}

NOCOV static void jlit(struct json_in *j, const char *lit)
{
    size_t l = strlen(lit);
    if (j->n - j->i < l || memcmp(j->s + j->i, lit, l) != 0)
        jfail(j, "JSON report: bad literal");
    j->i += l;
}

NOCOV static int jhex(int c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

NOCOV static void jstring(struct json_in *j)
{
    j->i++; /* the opening quote */
    for (;;) {
        int c = jpeek(j);
        if (c < 0)
            jfail(j, "JSON report: unterminated string");
        if (c == '"') {
            j->i++;
            return;
        }
        if (c < 0x20)
            jfail(j, "JSON report: raw control character in a string");
        if (c == '\\') {
            j->i++;
            c = jpeek(j);
            if (c == 'u') {
                for (int k = 1; k <= 4; k++)
                    if (j->i + k >= j->n || !jhex((unsigned char)j->s[j->i + k]))
                        jfail(j, "JSON report: bad \\u escape");
                j->i += 5;
            } else if (c >= 0 && strchr("\"\\/bfnrt", c) && c) {
                j->i++;
            } else {
                jfail(j, "JSON report: bad escape");
            }
            continue;
        }
        size_t l = utf8_seq((const unsigned char *)j->s + j->i, j->n - j->i);
        if (!l)
            jfail(j, "JSON report: invalid UTF-8 in a string");
        j->i += l;
    }
}

NOCOV static void jnumber(struct json_in *j)
{
    if (jpeek(j) == '-')
        j->i++;
    int c = jpeek(j);
    if (c == '0') {
        j->i++;
    } else if (c >= '1' && c <= '9') {
        while ((c = jpeek(j)) >= '0' && c <= '9')
            j->i++;
    } else {
        jfail(j, "JSON report: bad number");
    }
    if (jpeek(j) == '.') {
        j->i++;
        if (!((c = jpeek(j)) >= '0' && c <= '9'))
            jfail(j, "JSON report: bad fraction");
        while ((c = jpeek(j)) >= '0' && c <= '9')
            j->i++;
    }
    if (jpeek(j) == 'e' || jpeek(j) == 'E') {
        j->i++;
        if (jpeek(j) == '+' || jpeek(j) == '-')
            j->i++;
        if (!((c = jpeek(j)) >= '0' && c <= '9'))
            jfail(j, "JSON report: bad exponent");
        while ((c = jpeek(j)) >= '0' && c <= '9')
            j->i++;
    }
}

NOCOV static void jvalue(struct json_in *j, int depth)
{
    if (depth > 64)
        jfail(j, "JSON report: nested deeper than 64");
    jws(j);
    int c = jpeek(j);
    if (c == '{' || c == '[') {
        int close = c == '{' ? '}' : ']';
        j->i++;
        jws(j);
        if (jpeek(j) == close) {
            j->i++;
            return;
        }
        for (;;) {
            if (c == '{') {
                jws(j);
                if (jpeek(j) != '"')
                    jfail(j, "JSON report: object key is not a string");
                jstring(j);
                jws(j);
                if (jpeek(j) != ':')
                    jfail(j, "JSON report: missing ':'");
                j->i++;
            }
            jvalue(j, depth + 1);
            jws(j);
            int d = jpeek(j);
            j->i++;
            if (d == close)
                return;
            if (d != ',')
                jfail(j, "JSON report: missing ',' or closing bracket");
        }
    }
    if (c == '"')
        jstring(j);
    else if (c == 't')
        jlit(j, "true");
    else if (c == 'f')
        jlit(j, "false");
    else if (c == 'n')
        jlit(j, "null");
    else
        jnumber(j);
}

NOCOV void check_json(const char *out, size_t len)
{
    struct json_in j = {out, len, 0};
    jws(&j);
    if (jpeek(&j) != '{')
        jfail(&j, "JSON report: does not start with an object");
    jvalue(&j, 0);
    jws(&j);
    if (j.i != j.n)
        jfail(&j, "JSON report: bytes after the value");
}

NOCOV void check_folded(const char *out, size_t len)
{
    check_plain(out, len, true); /* folded escapes C1 too: U+0085 would split a line for some readers */
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(out + i, '\n', len - i);
        if (!nl)
            broken("folded: last line without a newline", out, len, i);
        size_t end = (size_t)(nl - out), k = end;
        while (k > i && out[k - 1] >= '0' && out[k - 1] <= '9')
            k--;
        if (k == end || k == i || out[k - 1] != ' ')
            broken("folded: a line does not end in \" BYTES\"", out, len, i);
        i = end + 1;
    }
}

NOCOV static size_t count(const char *hay, size_t len, const char *needle)
{
    size_t n = 0, l = strlen(needle);
    for (const char *p = hay; (p = memmem(p, len - (size_t)(p - hay), needle, l)) != NULL; p += l)
        n++;
    return n;
}

NOCOV void check_html(const char *out, size_t len)
{
    for (size_t i = 0; i < len;) {
        const unsigned char *p = (const unsigned char *)out;
        if (p[i] < 0x20 && p[i] != '\n' && p[i] != '\t')
            broken("html: control character", out, len, i);
        size_t l = utf8_seq(p + i, len - i);
        if (!l)
            broken("html: invalid UTF-8", out, len, i);
        i += l;
    }
    /* The page's own elements: one data block and one script, or the script alone where the timeline says
     * it has nothing to draw (data-empty); a snapshot string adds none. */
    int empty = memmem(out, len, "data-empty=\"1\"", 14) != NULL;
    size_t scripts = empty ? 1 : 2;
    if (count(out, len, "<script") != scripts || count(out, len, "</script>") != scripts)
        broken("html: a string opened or closed a <script> element", out, len, 0);
    static const char open[] = "<script type=\"application/json\" id=\"oomtrace-data\">";
    const char *d = memmem(out, len, open, sizeof open - 1);
    if (empty) {
        if (d)
            broken("html: oomtrace-data beside an empty timeline", out, len, (size_t)(d - out));
        return;
    }
    if (!d)
        broken("html: no oomtrace-data element", out, len, 0);
    d += sizeof open - 1;
    const char *e = memmem(d, len - (size_t)(d - out), "</script>", 9);
    if (!e)
        broken("html: oomtrace-data is not closed", out, len, (size_t)(d - out));
    const char *lt = memchr(d, '<', (size_t)(e - d));
    if (lt)
        broken("html: '<' inside the JSON data", out, len, (size_t)(lt - out));
    check_json(d, (size_t)(e - d));
}
