#include "modes/load.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbols/resolve.h"
#include "symbols/symbolize.h"

/* Snapshots are read whole; a file beyond this is refused rather than exhausting memory. */
#define OT_LOAD_MAX_BYTES (64ull << 30)
/* A stream (standard input, a FIFO) has no size to check first: what it may bring is bounded by the size of
 * the largest snapshot the tracer writes by default (OOMTRACE_MAX_BYTES, 1G), or by --max-memory when given.
 * A valid header followed by an endless stream was read until the machine ran out of memory. */
#define OT_STREAM_MAX_BYTES (1ull << 30)

/* Reads exactly what is there, up to cap bytes, retrying on EINTR; -1 on a read error. */
static ssize_t read_some(int fd, uint8_t *p, size_t cap)
{
    size_t n = 0;
    while (n < cap) {
        ssize_t r = read(fd, p + n, cap - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        n += (size_t)r;
    }
    return (ssize_t)n;
}

/* A regular file's parts, header by header, before the file is read whole: what the parser would refuse at a
 * header (a zero-filled tail, a run of parts of unknown kinds) is refused after a few small reads, not after
 * the gigabytes before it are read into memory (helper-91 #1: a snapshot with a 20 GiB zero tail). The walk
 * stops quietly at anything else, which the parser then says in full: another major version (its header may
 * differ), a second snapshot's magic where a part starts, a part past the end, and more parts than a snapshot
 * has (helper-92: 44 million empty PEAK parts took a read each, where the parser refuses the first). */
#define OT_WALK_MAX_PARTS (OT_MAX_UNKNOWN_PARTS + 1024)
static int walk_parts(int fd, uint64_t size, char err[OT_ERRBUF])
{
    uint8_t fh[OT_FILE_HEADER_SIZE];
    if (pread(fd, fh, sizeof(fh), 0) != (ssize_t)sizeof(fh) || (fh[8] | fh[9] << 8) != OT_VERSION_MAJOR)
        return 0;
    uint64_t off = OT_FILE_HEADER_SIZE;
    size_t unknown = 0;
    for (size_t n = 0; n < OT_WALK_MAX_PARTS && size - off >= OT_SECTION_HEADER_SIZE; n++) {
        uint8_t h[OT_SECTION_HEADER_SIZE];
        ssize_t r;
        do
            r = pread(fd, h, sizeof(h), (off_t)off);
        while (r < 0 && errno == EINTR);
        if (r != (ssize_t)sizeof(h) || memcmp(h, OT_MAGIC, sizeof(OT_MAGIC) - 1) == 0)
            return 0;
        if (ot_part_refused(h, off, size, unknown, err) < 0)
            return -1;
        unknown += !ot_part_known(ot_part_type(h));
        uint64_t stored = ot_part_stored(h);
        if (stored > size - off - OT_SECTION_HEADER_SIZE)
            return 0;
        off += OT_SECTION_HEADER_SIZE + stored;
    }
    return 0;
}

int ot_read_file(const char *path, bool regular_only, uint8_t **out, size_t *len, char err[OT_ERRBUF])
{
    int is_stdin = strcmp(path, "-") == 0;
    /* O_NONBLOCK: opening a FIFO must not wait for a writer (a FIFO found in a directory is refused; one the
     * user named, /dev/stdin or <(zstdcat S.zst), is read like -, and no writer reads as an empty file). */
    int fd = is_stdin ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        snprintf(err, OT_ERRBUF, "%s", strerror(errno));
        return -1;
    }
    uint8_t *buf = NULL;
    struct stat st;
    if (fstat(fd, &st) != 0) {
        snprintf(err, OT_ERRBUF, "%s", strerror(errno));
        goto fail;
    }
    if (S_ISDIR(st.st_mode)) {
        snprintf(err, OT_ERRBUF, "is a directory");
        goto fail;
    }
    if (!is_stdin && regular_only && !S_ISREG(st.st_mode)) {
        snprintf(err, OT_ERRBUF, "not a regular file (a directory's snapshots are read from regular files)");
        goto fail;
    }
    if (!is_stdin)
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    /* The magic first, for a file as for a stream: what is no snapshot (a checkpoint, a core file, /dev/zero as
     * input) is refused after 8 bytes, never after reading gigabytes into memory. */
    uint8_t magic[sizeof(OT_MAGIC) - 1];
    ssize_t m = read_some(fd, magic, sizeof(magic));
    if (m < 0) {
        snprintf(err, OT_ERRBUF, "%s", strerror(errno));
        goto fail;
    }
    if ((size_t)m == sizeof(magic) && memcmp(magic, OT_MAGIC, sizeof(magic)) != 0) {
        ot_not_a_snapshot(magic, sizeof(magic), err);
        goto fail;
    }
    if ((unsigned long long)st.st_size > OT_LOAD_MAX_BYTES) {
        snprintf(err, OT_ERRBUF, "too large for a snapshot (%lld bytes; this reader takes up to %llu GiB)", (long long)st.st_size,
                 OT_LOAD_MAX_BYTES >> 30);
        goto fail;
    }
    if (!is_stdin && S_ISREG(st.st_mode) && (size_t)m == sizeof(magic) && (uint64_t)st.st_size > OT_FILE_HEADER_SIZE &&
        walk_parts(fd, (uint64_t)st.st_size, err) < 0)
        goto fail;
    size_t cap = S_ISREG(st.st_mode) && st.st_size > 0 ? (size_t)st.st_size : 1 << 20, n = (size_t)m;
    if (cap < sizeof(struct ot_file_header))
        cap = sizeof(struct ot_file_header);
    buf = malloc(cap);
    if (!buf) {
        snprintf(err, OT_ERRBUF, "out of memory for %zu bytes", cap);
        goto fail;
    }
    memcpy(buf, magic, n);
    size_t stream_max = S_ISREG(st.st_mode) ? OT_LOAD_MAX_BYTES : ot_read_budget_given() ? ot_read_budget_given()
                                                                                         : OT_STREAM_MAX_BYTES;
    for (;;) {
        if (n >= stream_max) {
            snprintf(err, OT_ERRBUF, "the stream passed %zu MiB (%s) and had not ended: a stream that does not end? "
                     "Give a file, or --max-memory SIZE to read more", stream_max >> 20,
                     ot_read_budget_given() ? "--max-memory" : "the tracer's largest snapshot by default, OOMTRACE_MAX_BYTES");
            goto fail;
        }
        if (n == cap) {
            size_t ncap = cap * 2 < stream_max ? cap * 2 : stream_max;
            uint8_t *nb = ncap > cap && ncap <= OT_LOAD_MAX_BYTES ? realloc(buf, ncap) : NULL;
            if (!nb) {
                snprintf(err, OT_ERRBUF, "out of memory reading the file");
                goto fail;
            }
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            snprintf(err, OT_ERRBUF, "%s", strerror(errno));
            goto fail;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    if (!is_stdin)
        close(fd);
    *out = buf;
    *len = n;
    return 0;
fail:
    free(buf);
    if (!is_stdin)
        close(fd);
    return -1;
}

int ot_load(struct ot_loaded *l, const char *path, const struct ot_load_opts *o, char errbuf[OT_ERRBUF])
{
    memset(l, 0, sizeof(*l));
    l->path = path;
    if (ot_read_file(path, o->regular_only, &l->buf, &l->len, errbuf) < 0)
        return -1;
    if (ot_snapshot_parse(l->buf, l->len, &l->snap, errbuf) < 0) {
        ot_loaded_free(l);
        return -1;
    }
    l->parsed = true;
    l->sym = o->symbolize ? ot_symbolizer_new(&l->snap, o->debug_dirs, o->ndebug) : NULL;
    struct ot_symbolizer_info info;
    ot_symbolizer_info(l->sym, &info);
    l->res = ot_resolver_new(&l->snap, l->sym);
    if (!l->res) {
        snprintf(errbuf, OT_ERRBUF, "out of memory");
        ot_loaded_free(l);
        return -1;
    }
    if (ot_analyze(&l->an, &l->snap, l->res, &info, errbuf) < 0) {
        ot_loaded_free(l);
        return -1;
    }
    l->analyzed = true;
    return 0;
}

void ot_loaded_free(struct ot_loaded *l)
{
    if (l->analyzed)
        ot_analysis_free(&l->an);
    if (l->res)
        ot_resolver_free(l->res);
    if (l->sym)
        ot_symbolizer_free(l->sym);
    if (l->parsed)
        ot_snapshot_free(&l->snap);
    free(l->buf);
    memset(l, 0, sizeof(*l));
}

uint64_t ot_max_peak(const struct ot_analysis *a, int64_t *device)
{
    uint64_t best = 0;
    int64_t dev = -1;
    bool found = false;
    for (size_t i = 0; i < a->npeaks; i++)
        if (!found || a->peaks[i].bytes > best) {
            found = true;
            best = a->peaks[i].bytes;
            dev = a->peaks[i].device;
        }
    if (device)
        *device = dev;
    return best;
}

bool ot_is_dir(const char *path)
{
    struct stat st;
    return strcmp(path, "-") != 0 && stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int ot_list_snapshots(const char *dir, char ***paths, size_t *n, char errbuf[OT_ERRBUF])
{
    *paths = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(errbuf, OT_ERRBUF, "%s", strerror(errno));
        return -1;
    }
    char **v = NULL;
    size_t cnt = 0, cap = 0;
    struct dirent *e;
    size_t dl = strlen(dir);
    while ((e = readdir(d)) != NULL) {
        size_t nl = strlen(e->d_name);
        if (nl < 6 || strcmp(e->d_name + nl - 5, ".oomt") != 0 || e->d_name[0] == '.')
            continue;
        if (cnt == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            char **nv = realloc(v, ncap * sizeof(char *));
            if (!nv)
                goto oom;
            v = nv;
            cap = ncap;
        }
        char *p = malloc(dl + nl + 2);
        if (!p)
            goto oom;
        memcpy(p, dir, dl);
        size_t o = dl;
        if (o == 0 || p[o - 1] != '/')
            p[o++] = '/';
        memcpy(p + o, e->d_name, nl + 1);
        v[cnt++] = p;
    }
    closedir(d);
    if (cnt > 1)
        qsort(v, cnt, sizeof(char *), cmp_str);
    *paths = v;
    *n = cnt;
    return 0;
oom:
    closedir(d);
    ot_strv_free(v, cnt);
    snprintf(errbuf, OT_ERRBUF, "out of memory listing the directory");
    return -1;
}

void ot_no_snapshot_msg(const char *dir, char errbuf[OT_ERRBUF])
{
    size_t runs = 0;
    char latest[256] = "";
    DIR *d = opendir(dir);
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) {
        if (strncmp(e->d_name, "run-", 4) != 0 || strlen(e->d_name) >= sizeof(latest))
            continue;
        char path[4096];
        struct stat st;
        if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, e->d_name) >= sizeof(path) ||
            stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
            continue;
        runs++;
        if (strcmp(e->d_name, latest) > 0)
            snprintf(latest, sizeof(latest), "%s", e->d_name);
    }
    if (d)
        closedir(d);
    if (!runs) {
        snprintf(errbuf, OT_ERRBUF, "no *.oomt snapshot in the directory");
        return;
    }
    size_t dl = strlen(dir);
    snprintf(errbuf, OT_ERRBUF,
             "no *.oomt snapshot in the directory itself (its subdirectories are not read), which holds %zu run "
             "director%s of oomtrace run: read one, "
             "e.g. the latest, %.*s/%s",
             runs, runs == 1 ? "y" : "ies", (int)(dl && dir[dl - 1] == '/' ? dl - 1 : dl), dir, latest);
}
