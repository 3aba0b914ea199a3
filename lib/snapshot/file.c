/* The file: its name, its creation, compression of each section, and the write. A snapshot is written
 * to a new file, never over another; the crash-surviving flush replaces its last flush as a whole. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "snapshot/snapshot.h"
#include "snapshot/writer.h"

static int warned_flush;

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int write_section(int fd, const struct trace_section *s, ZSTD_CCtx *cctx)
{
    struct ot_section_header h = {.type = s->type, .flags = 0, .stored_len = s->b.len, .raw_len = s->b.len};
    const void *payload = s->b.p;
    void *z = NULL;
    /* EVENTS chunks are compressed already; small sections are not worth a frame. */
    if (s->type != OT_SEC_EVENTS && s->b.len > 512 && cctx) {
        size_t bound = ZSTD_compressBound(s->b.len);
        z = malloc(bound);
        size_t zn = z ? ZSTD_compressCCtx(cctx, z, bound, s->b.p, s->b.len, 1) : 0;
        if (z && !ZSTD_isError(zn) && zn < s->b.len) {
            h.flags = OT_SECTION_ZSTD;
            h.stored_len = zn;
            payload = z;
        }
    }
    int rc = write_all(fd, &h, sizeof h) || write_all(fd, payload, (size_t)h.stored_len) ? -1 : 0;
    free(z);
    return rc;
}

/* oomtrace-HOST-PID[-rankR]-TAG.oomt, with '/' and ' ' kept out of the host part. */
static void snapshot_name(char *path, size_t len, const char *tag, const struct trace_rank *rk)
{
    char host[128] = "";
    gethostname(host, sizeof host - 1);
    for (char *c = host; *c; c++)
        if (*c == '/' || *c == ' ')
            *c = '_';
    char rank[32] = "";
    if (rk->rank >= 0)
        snprintf(rank, sizeof rank, "-rank%ld", rk->rank);
    snprintf(path, len, "%s/oomtrace-%s-%d%s-%s.oomt", ot_opt.dir, host, (int)getpid(), rank, tag);
}

/* Never follow a link planted in the directory, never overwrite. */
static int create_private(const char *path)
{
    return open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
}

static int open_snapshot(char *path, size_t len, enum ot_trigger trigger, unsigned seq, const struct trace_rank *rk)
{
    for (unsigned attempt = 0; attempt < 100; attempt++) {
        char tag[48];
        snprintf(tag, sizeof tag, attempt ? "%u-%s.%u" : "%u-%s", seq, ot_trigger_name(trigger), attempt);
        snapshot_name(path, len, tag, rk);
        int fd = create_private(path);
        if (fd >= 0 || errno != EEXIST)
            return fd;
    }
    return -1;
}

/* The crash-surviving trace is one file per process, replaced as a whole at each flush (written beside it,
 * then renamed over it), so a kill at any moment leaves the last complete flush. */
static int open_flush(char *tmp, size_t len, char *final, const struct trace_rank *rk)
{
    snapshot_name(final, len - 8, "flush", rk);
    snprintf(tmp, len, "%.1000s.tmp", final);
    unlink(tmp); /* our own leftover from a flush that failed */
    return create_private(tmp);
}

void ot_flush_file_remove(void)
{
    struct trace_rank rk;
    ot_gather_rank(&rk);
    char path[1024];
    snapshot_name(path, sizeof path, "flush", &rk);
    unlink(path);
}

int ot_file_write(const struct trace_sections *secs, enum ot_trigger trigger, unsigned seq,
                  const struct trace_rank *rk, char path[OT_PATH_MAX])
{
    int flush = trigger == OT_TRIGGER_FLUSH, rc = -1;
    int oom = 0;
    for (int i = 0; i < secs->n; i++)
        oom |= secs->s[i].b.oom;
    char final[OT_PATH_MAX];
    int fd = -1;
    if (oom) {
        ot_log("not enough memory to build a snapshot (trigger %s); none written", ot_trigger_name(trigger));
    } else if ((fd = flush ? open_flush(path, OT_PATH_MAX, final, rk)
                           : open_snapshot(path, OT_PATH_MAX, trigger, seq, rk)) < 0) {
        /* Said once: at the first allocation when the directory was already unusable, else here. */
        if (!ot_dir_warned && (!flush || !__atomic_exchange_n(&warned_flush, 1, __ATOMIC_RELAXED)))
            ot_log("cannot create a snapshot in %s: %s", ot_opt.dir, strerror(errno));
    } else {
        /* A flush is not a finished file: if it is what remains, the process did not finish. */
        struct ot_file_header fh = {.version_major = OT_VERSION_MAJOR, .version_minor = OT_VERSION_MINOR,
                                    .flags = flush ? 0 : OT_FILE_COMPLETE};
        memcpy(fh.magic, OT_MAGIC, 8);
        ZSTD_CCtx *cctx = ZSTD_createCCtx();
        int bad = write_all(fd, &fh, sizeof fh);
        for (int i = 0; i < secs->n && !bad; i++)
            bad = write_section(fd, &secs->s[i], cctx);
        ZSTD_freeCCtx(cctx);
        int err = errno;
        if (close(fd) != 0 && !bad) {
            bad = 1;
            err = errno;
        }
        if (!bad && flush && rename(path, final) != 0) {
            bad = 1;
            err = errno;
        }
        if (bad) {
            if (!flush || !__atomic_exchange_n(&warned_flush, 1, __ATOMIC_RELAXED))
                ot_log("cannot write snapshot %s: %s; removed the partial file", path, strerror(err));
            unlink(path);
        } else if (flush) {
            rc = 0;
        } else {
            rc = 0;
            if (!ot_opt.quiet)
                ot_log("snapshot written: %s (%s)", path, ot_trigger_name(trigger));
        }
    }
    return rc;
}
