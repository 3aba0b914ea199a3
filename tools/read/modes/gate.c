#include "modes/gate.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>

int ot_parse_size(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+' || isspace((unsigned char)*s))
        return -1;
    /* Whole numbers exactly; a fraction through double. */
    char *end;
    errno = 0;
    unsigned long long whole = strtoull(s, &end, 10);
    if (end == s || errno)
        return -1;
    double frac = 0;
    bool has_frac = false;
    if (*end == '.') {
        char *fe;
        errno = 0;
        double f = strtod(end, &fe);
        if (fe == end || errno || !isfinite(f))
            return -1;
        frac = f;
        has_frac = true;
        end = fe;
    }
    unsigned shift = 0;
    switch (toupper((unsigned char)*end)) {
    case 'K':
        shift = 10;
        end++;
        break;
    case 'M':
        shift = 20;
        end++;
        break;
    case 'G':
        shift = 30;
        end++;
        break;
    case 'T':
        shift = 40;
        end++;
        break;
    default:
        break;
    }
    if (shift && (*end == 'i' || *end == 'I'))
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end)
        return -1;
    /* A fraction of a byte is no size: 1.5 without a unit was meant as 1.5G or 1.5M, and a gate of 1 byte
     * would fail every run as if it were a regression. */
    if (has_frac && !shift)
        return -1;
    if (whole > (UINT64_C(1) << 63) >> shift)
        return -1;
    uint64_t v = (uint64_t)whole << shift;
    if (has_frac) {
        double extra = floor(frac * (double)(UINT64_C(1) << shift));
        if (extra < 0 || (double)v + extra > 9.2e18)
            return -1;
        v += (uint64_t)extra;
    }
    *out = v;
    return 0;
}

int ot_parse_percent(const char *s, double *out)
{
    if (!s || !*s || isspace((unsigned char)*s))
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !isfinite(v) || v < 0 || v > 1e9)
        return -1;
    if (*end == '%')
        end++;
    if (*end)
        return -1;
    *out = v;
    return 0;
}

bool ot_gate_active(const struct ot_gate *g)
{
    return g->max_peak_set || g->growth_set;
}

void ot_gate_peak_of_analysis(const struct ot_analysis *a, const char *path, struct ot_gate_peak *p)
{
    memset(p, 0, sizeof(*p));
    p->bytes = ot_max_peak(a, &p->device);
    p->known = a->npeaks > 0;
    snprintf(p->path, sizeof(p->path), "%s", path);
}

int ot_gate_peak_of_path(const char *path, const struct ot_load_opts *o, struct ot_gate_peak *p, char errbuf[OT_ERRBUF])
{
    memset(p, 0, sizeof(*p));
    struct ot_load_opts plain = *o;
    plain.symbolize = false; /* numbers only */
    if (!ot_is_dir(path)) {
        struct ot_loaded l;
        if (ot_load(&l, path, &plain, errbuf) < 0)
            return -1;
        ot_gate_peak_of_analysis(&l.an, path, p);
        ot_loaded_free(&l);
        return 0;
    }
    char **files;
    size_t n;
    if (ot_list_snapshots(path, &files, &n, errbuf) < 0)
        return -1;
    plain.regular_only = true;
    /* The processes the snapshots came from, by host and pid (a process may leave several files). */
    struct { uint64_t host, pid; } *procs = calloc(n ? n : 1, sizeof(*procs));
    size_t ok = 0, nprocs = 0, nbad = 0;
    char first_err[OT_ERRBUF] = "";
    for (size_t i = 0; i < n; i++) {
        struct ot_loaded l;
        char err[OT_ERRBUF];
        if (ot_load(&l, files[i], &plain, err) < 0) {
            nbad++;
            if (!first_err[0])
                snprintf(first_err, sizeof(first_err), "%.200s: %.280s", files[i], err);
            continue;
        }
        struct ot_gate_peak q;
        ot_gate_peak_of_analysis(&l.an, files[i], &q);
        uint64_t host = 1469598103934665603ull, pid = l.snap.meta.pid;
        for (size_t k = 0; k < l.snap.meta.host.n; k++)
            host = (host ^ (unsigned char)l.snap.meta.host.p[k]) * 1099511628211ull;
        ot_loaded_free(&l);
        ok++;
        size_t k = 0;
        while (procs && k < nprocs && (procs[k].host != host || procs[k].pid != pid))
            k++;
        if (procs && k == nprocs) {
            procs[nprocs].host = host;
            procs[nprocs++].pid = pid;
        }
        /* The first readable file stands until one with a known peak beats it: --diff needs a file. */
        if (!p->path[0] || (q.known && (!p->known || q.bytes > p->bytes)))
            *p = q;
    }
    free(procs);
    p->nfiles = ok;
    p->nprocs = nprocs;
    p->nbad = nbad;
    ot_strv_free(files, n);
    if (!ok) {
        if (first_err[0])
            snprintf(errbuf, OT_ERRBUF, "no readable snapshot (%s)", first_err);
        else
            ot_no_snapshot_msg(path, errbuf);
        return -1;
    }
    return 0;
}

/* One line per gate, passed or failed: a CI log must show that the gate ran and what it measured, not only
 * when it fails. */
static void add_msg(struct ot_gate_result *r, bool failed, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void add_msg(struct ot_gate_result *r, bool failed, const char *fmt, ...)
{
    if (failed)
        r->rc = 1;
    if (r->nmsg >= 2)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->msg[r->nmsg++], OT_GATE_MSG, fmt, ap);
    va_end(ap);
}

/* A growth percentage as people write it ("255.9%", "20%", not "255.8719%" or "20.0000%"): one decimal, more
 * only when needed to put it on its true side of the limit (9.9997% against 10 is not "10%", 0.004% over a
 * limit of 0 is not "0%"). Without its sign: the line says above or below. */
static const char *fmt_growth(char buf[48], double growth, double limit)
{
    for (int prec = 1; prec <= 8; prec++) {
        snprintf(buf, 48, "%.*f", prec, growth);
        double shown = strtod(buf, NULL);
        if (((shown > limit) == (growth > limit) && (shown == limit) == (growth == limit)) || prec == 8)
            break;
    }
    char *dot = strchr(buf, '.');
    if (dot) {
        char *end = buf + strlen(buf);
        while (end > dot + 1 && end[-1] == '0')
            *--end = '\0';
        if (end == dot + 1)
            *dot = '\0';
    }
    if (buf[0] == '-')
        return strcmp(buf, "-0") == 0 ? "0" : buf + 1;
    return buf;
}

/* "1 byte", "2 bytes": the count's noun for the gate's lines. */
static const char *bytes_word(uint64_t n)
{
    return n == 1 ? "byte" : "bytes";
}

void ot_gate_eval(const struct ot_gate *g, const struct ot_gate_peak *peak, const struct ot_gate_peak *base,
                  struct ot_gate_result *r)
{
    memset(r, 0, sizeof(*r));
    r->speaker = g->speaker;
    char b1[32], b2[32];
    if (g->max_peak_set) {
        bool over = peak->bytes > g->max_peak;
        add_msg(r, over, "gate --max-peak %s: peak %s (%" PRIu64 " %s) on device %" PRId64 " in %.300s %s %s (%" PRIu64 " %s)",
                over ? "failed" : "passed", ot_fmt_bytes(b1, peak->bytes), peak->bytes, bytes_word(peak->bytes),
                peak->device, peak->path, over ? "exceeds" : "is within", ot_fmt_bytes(b2, g->max_peak), g->max_peak,
                bytes_word(g->max_peak));
    }
    if (g->growth_set && base) {
        if (base->bytes == 0) {
            bool over = peak->bytes > 0;
            add_msg(r, over, "gate --max-growth %s: peak %s (%" PRIu64 " bytes) in %.250s, the baseline's peak is 0 B in %.250s"
                    " (%s %g%%)",
                    over ? "failed" : "passed", ot_fmt_bytes(b1, peak->bytes), peak->bytes, peak->path, base->path,
                    over ? "any growth is more than" : "no growth, within", g->max_growth);
        } else {
            double growth = 100.0 * ((double)peak->bytes - (double)base->bytes) / (double)base->bytes;
            bool over = growth > g->max_growth;
            char pct[48];
            add_msg(r, over, "gate --max-growth %s: peak %s (%" PRIu64 " bytes) in %.250s is %s%% %s the baseline's %s (%" PRIu64
                    " bytes) in %.250s, %s %g%%",
                    over ? "failed" : "passed", ot_fmt_bytes(b1, peak->bytes), peak->bytes, peak->path,
                    fmt_growth(pct, growth, g->max_growth), growth < 0 ? "below" : "above",
                    ot_fmt_bytes(b2, base->bytes), base->bytes, base->path, over ? "more than" : "within", g->max_growth);
        }
    }
}

int ot_gate_report(const struct ot_gate_result *r)
{
    for (size_t i = 0; i < r->nmsg; i++)
        fprintf(stderr, "%s: %s\n", r->speaker ? r->speaker : "oomtrace-read", r->msg[i]);
    return r->rc;
}
