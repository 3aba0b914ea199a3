/* libFuzzer target for the snapshot reader: the parser on arbitrary bytes and, when it accepts them,
 * everything the CLI does afterwards (ring decoding, analysis, and all six report formats).
 *
 * Beyond "no crash, no sanitizer report", it checks the promises the reader makes to its callers (the
 * checks of rendered bytes are in fuzz_checks.c):
 *   - a rejected input yields one line of text in errbuf (the CLI prints it as its only stderr line);
 *   - the JSON report is one well-formed JSON value in strict UTF-8 (tools parse it; docs/JSON.md);
 *   - text, markdown and folded output are UTF-8 without control characters but newlines (a hostile
 *     snapshot must not drive the terminal, split a folded line or a table row), and every folded line
 *     ends in a byte count (docs/FORMATS.md);
 *   - the HTML page's embedded data is well-formed JSON without '<', and no snapshot string closes or
 *     opens a <script> element;
 *   - JSON, folded and markdown render the same bytes twice in a row (FORMATS.md: deterministic; a
 *     renderer that changed the analysis it was given would break this).
 * A broken promise aborts, so libFuzzer saves the input like any other crash.
 *
 * Inputs that start with "RING" take a second path: the rest is one ring chunk's decompressed bytes
 * (u16 little-endian event count, then events as in docs/FORMAT.md), wrapped here into a minimal valid
 * snapshot with that chunk zstd-compressed. Ring chunks are always compressed on disk, so mutations of a
 * plain snapshot almost never reach the event decoder with valid frames; this path does.
 *
 * Symbolization stays off: it opens files named by the input, which a fuzzer should not drive.
 * Build and run: make fuzz / make fuzz-corpus (tests/fuzz/fuzz.mk). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "fuzz_checks.h"

#include "analyze/analysis.h"
#include "model/events.h"
#include "render/report.h"
#include "symbols/resolve.h"
#include "model/snapshot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The memory limits travel with the target, not only with fuzz.mk's command line: run by hand, on a saved
 * input or a corpus, an input that amplifies past them is still a finding. The reader's budget (128 x the
 * input + 32 MiB, model/snapshot.h) keeps every input of libFuzzer's sizes far below them, sanitizer
 * shadow included. A limit given on the command line wins (libFuzzer takes a flag's last value, and these
 * come first). */
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static const char *const limits[] = {"-rss_limit_mb=1024", "-malloc_limit_mb=512"};
    enum { NLIMITS = sizeof limits / sizeof limits[0] };
    char **args = malloc(((size_t)*argc + NLIMITS + 1) * sizeof *args);
    if (!args)
        return 0;
    args[0] = (*argv)[0];
    for (int i = 0; i < NLIMITS; i++)
        args[1 + i] = (char *)limits[i];
    for (int i = 1; i < *argc; i++)
        args[NLIMITS + i] = (*argv)[i];
    *argc += NLIMITS;
    args[*argc] = NULL;
    *argv = args;
    return 0;
}

/* ---- the pipeline of the CLI ---- */

/* Memory sinks are reused across inputs; open_memstream's buffer survives fclose when kept. */
struct sink {
    char *buf;
    size_t len;
    FILE *f;
};

static void sink_open(struct sink *s)
{
    free(s->buf);
    s->buf = NULL;
    s->len = 0;
    s->f = open_memstream(&s->buf, &s->len);
    if (!s->f)
        abort();
}

static void sink_close(struct sink *s)
{
    if (fclose(s->f) != 0)
        abort();
    s->f = NULL;
}

typedef int (*render_fn)(FILE *, const struct ot_analysis *, const struct ot_report_opts *);
static struct sink out1, out2;

static const char *render(struct sink *k, render_fn fn, const struct ot_analysis *a, const struct ot_report_opts *o)
{
    sink_open(k);
    if (fn(k->f, a, o) != 0)
        abort();
    sink_close(k);
    return k->buf;
}

/* Renders into out1, then again into out2; the two must be the same bytes. */
static const char *render_twice(render_fn fn, const struct ot_analysis *a, const struct ot_report_opts *o)
{
    render(&out1, fn, a, o);
    render(&out2, fn, a, o);
    if (out1.len != out2.len || memcmp(out1.buf, out2.buf, out1.len) != 0) {
        size_t i = 0;
        while (i < out1.len && i < out2.len && out1.buf[i] == out2.buf[i])
            i++;
        broken("a second rendering differs from the first", out1.buf, out1.len, i);
    }
    return out1.buf;
}

static volatile unsigned char label_sink; /* labels must be readable, not just pointed at */

static void decode_ring(const struct ot_snapshot *s)
{
    struct ot_event_reader rd;
    ot_event_reader_init(&rd, s);
    const struct snap_event *ev;
    size_t n;
    char err[OT_ERRBUF];
    int rc;
    while ((rc = ot_event_reader_next(&rd, &ev, &n, err)) == 1)
        for (size_t i = 0; i < n; i++)
            for (size_t k = 0; k < ev[i].label.n; k++)
                label_sink = (unsigned char)ev[i].label.p[k];
    if (rc < 0 && (memchr(err, 0, OT_ERRBUF) == NULL || strchr(err, '\n')))
        abort();
    ot_event_reader_free(&rd);
}

/* ---- ring mode: a chunk's raw bytes in a minimal snapshot ---- */

struct out {
    uint8_t *p;
    size_t n, cap;
};

static void put(struct out *o, const void *p, size_t n)
{
    if (o->n + n > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        while (cap < o->n + n)
            cap *= 2;
        o->p = realloc(o->p, cap);
        if (!o->p)
            abort();
        o->cap = cap;
    }
    memcpy(o->p + o->n, p, n);
    o->n += n;
}

static void put_uv(struct out *o, uint64_t v)
{
    uint8_t b[10];
    size_t n = 0;
    do {
        b[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            b[n] |= 0x80;
        n++;
    } while (v);
    put(o, b, n);
}

static void put_le(struct out *o, uint64_t v, size_t bytes)
{
    for (size_t i = 0; i < bytes; i++) {
        uint8_t b = (uint8_t)(v >> (8 * i));
        put(o, &b, 1);
    }
}

static void put_section(struct out *o, uint32_t type, const struct out *payload)
{
    put_le(o, type, 4);
    put_le(o, 0, 4);
    put_le(o, payload->n, 8);
    put_le(o, payload->n, 8);
    put(o, payload->p, payload->n);
}

static void run_snapshot(const uint8_t *data, size_t size);

/* data: u16 event count, then the chunk's raw bytes. The count is capped where the parser would refuse
 * the chunk (9 bytes per event at least), so that mutated counts still reach the decoder. */
static void run_ring(const uint8_t *data, size_t size)
{
    if (size < 2)
        return;
    uint64_t nevents = data[0] | (uint64_t)data[1] << 8;
    const uint8_t *raw = data + 2;
    size_t raw_len = size - 2;
    if (nevents > raw_len / 9)
        nevents = raw_len / 9;

    size_t bound = ZSTD_compressBound(raw_len);
    uint8_t *frame = malloc(bound ? bound : 1);
    if (!frame)
        abort();
    size_t flen = ZSTD_compress(frame, bound, raw, raw_len, 1);
    if (ZSTD_isError(flen))
        abort();

    struct out meta = {0}, events = {0}, file = {0};
    put_uv(&meta, 0);           /* tracer_version */
    put_uv(&meta, 4);           /* trigger: api */
    put_uv(&meta, 0);           /* reason */
    put_uv(&meta, 1);           /* pid */
    put_uv(&meta, 0);           /* ppid */
    put_uv(&meta, 0);           /* host */
    put_uv(&meta, 0);           /* argc */
    put_uv(&meta, 0);           /* exe */
    put_uv(&meta, 0);           /* wall_ns */
    put_uv(&meta, 2000000000);  /* mono_ns */
    put_uv(&meta, 1000000000);  /* start_mono_ns */
    put_uv(&meta, 1);           /* rank -1 */
    put_uv(&meta, 1);           /* local_rank -1 */
    put_uv(&meta, 1);           /* world_size -1 */
    put_uv(&meta, 0);           /* rank_source */
    put_uv(&meta, nevents);     /* events_recorded */
    put_uv(&meta, nevents);     /* events_kept */
    for (int i = 0; i < 4; i++) /* dropped events and chunks, ring budget and use */
        put_uv(&meta, 0);
    put_uv(&meta, 1);           /* snapshot_seq */
    put_uv(&meta, 0);           /* python_version */
    put_uv(&meta, 0);           /* cuda_visible_devices */

    put_uv(&events, 1);
    put_uv(&events, 1);          /* first_seq */
    put_uv(&events, nevents);
    put_uv(&events, 1000000000); /* t0_ns */
    put_uv(&events, raw_len);
    put_uv(&events, flen);
    put(&events, frame, flen);

    put(&file, "OOMTRACE", 8);
    put_le(&file, 1, 2);
    put_le(&file, 0, 2);
    put_le(&file, 1, 4); /* COMPLETE */
    put_le(&file, 0, 8); /* reserved */
    put_le(&file, 0, 8);
    put_section(&file, 1, &meta);
    put_section(&file, 10, &events);

    /* An exact-size copy, so that a read past the end is a read past the allocation. */
    uint8_t *snap = malloc(file.n);
    if (!snap)
        abort();
    memcpy(snap, file.p, file.n);
    run_snapshot(snap, file.n);
    free(snap);
    free(meta.p);
    free(events.p);
    free(file.p);
    free(frame);
}

/* ---- the target ---- */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size >= 4 && memcmp(data, "RING", 4) == 0)
        run_ring(data + 4, size - 4);
    else
        run_snapshot(data, size);
    return 0;
}

static void run_snapshot(const uint8_t *data, size_t size)
{
    struct ot_snapshot s;
    char err[OT_ERRBUF];
    memset(err, 0x55, sizeof err);
    if (ot_snapshot_parse(data, size, &s, err) != 0) {
        const char *nul = memchr(err, 0, sizeof err);
        if (!nul || nul == err || strchr(err, '\n'))
            broken("parse error is not one non-empty line", err, nul ? (size_t)(nul - err) : sizeof err, 0);
        ot_snapshot_free(&s); /* documented as safe after a failed parse */
        return;
    }

    /* The model stays within the memory budget derived from the input's size. */
    if (s.arena.total > ot_read_budget(size))
        broken("model over the memory budget", err, 0, 0);

    decode_ring(&s);

    struct ot_resolver *r = ot_resolver_new(&s, NULL);
    if (!r)
        abort();
    struct ot_symbolizer_info si;
    memset(&si, 0, sizeof si);
    struct ot_analysis a;
    if (ot_analyze(&a, &s, r, &si, err) == 0) {
        /* The CLI's defaults, then each --at, an empty table, unlimited frames, --native. */
        static const struct ot_report_opts variants[] = {
            {.top = 10, .frames = 8, .at = OT_AT_DEFAULT},
            {.top = 3, .top_given = true, .frames = 2, .at = OT_AT_PEAK},
            {.top = 3, .top_given = true, .frames = 100, .at = OT_AT_FAILURE, .native = true},
            {.top = 0, .top_given = true, .frames = 0, .at = OT_AT_LIVE},
        };
        for (size_t i = 0; i < sizeof variants / sizeof variants[0]; i++) {
            struct ot_report_opts o = variants[i];
            o.path = "fuzz.oomt";
            check_plain(render(&out1, ot_report_text, &a, &o), out1.len, true);
            if (i == 0) {
                /* Rendered twice, the cheaper formats: deterministic, and no renderer changed the analysis
                 * for the ones after it. */
                check_json(render_twice(ot_report_json, &a, &o), out1.len);
                check_folded(render_twice(ot_report_folded, &a, &o), out1.len);
                check_plain(render_twice(ot_report_markdown, &a, &o), out1.len, false);
                check_html(render(&out1, ot_report_html, &a, &o), out1.len);
                render(&out1, ot_report_memviz, &a, &o);
            } else if (i == 2) {
                check_json(render(&out1, ot_report_json, &a, &o), out1.len);
                check_folded(render(&out1, ot_report_folded, &a, &o), out1.len);
                check_plain(render(&out1, ot_report_markdown, &a, &o), out1.len, false);
            }
        }
        ot_analysis_free(&a);
    } else if (memchr(err, 0, OT_ERRBUF) == NULL || strchr(err, '\n')) {
        abort();
    }
    ot_resolver_free(r);
    ot_snapshot_free(&s);
}
