/* The file: its name, its creation, compression of each section, and the write. A snapshot is written
 * under a hidden temporary name and published whole by rename, never over another file; the crash-surviving
 * flush replaces its own run's last flush as a whole. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "common/log.h"
#include "common/nosig.h"
#include "common/options.h"
#include "common/self.h"
#include "common/tsan.h"
#include "snapshot/snapshot.h"
#include "snapshot/writer.h"

int ot_dir_warned;

static int warned_flush;
static unsigned warned_create; /* a bit per trigger whose snapshot could not be created, said once */

/* The word that ends a snapshot's file name, and the line saying it was written: the format's trigger name,
 * but "dump" for the one the program asked for (oomtrace.dump / oomtrace_dump), which the user knows by the
 * call's name, not the format's "api". */
static const char *file_word(enum ot_trigger trigger)
{
    return trigger == OT_TRIGGER_API ? "dump" : ot_trigger_name(trigger);
}

/* The kind of snapshot in the user's words, for a line about it. */
static const char *trigger_words(enum ot_trigger trigger)
{
    switch (trigger) {
    case OT_TRIGGER_OOM:
        return "out-of-memory";
    case OT_TRIGGER_FRAMEWORK_OOM:
        return "framework out-of-memory";
    case OT_TRIGGER_API:
        return "requested (oomtrace.dump / oomtrace_dump)";
    case OT_TRIGGER_SIGNAL:
        return "OOMTRACE_SIGNAL";
    case OT_TRIGGER_FLUSH:
        return "crash-surviving";
    default:
        return ot_trigger_name(trigger) ? ot_trigger_name(trigger) : "requested";
    }
}

static int write_all(int fd, const void *p, size_t n, struct ot_nosig *q)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            ot_nosig_saw(q, errno);
        if (w <= 0)
            return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

static int write_section(int fd, const struct trace_section *s, ZSTD_CCtx *cctx, struct ot_nosig *q)
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
    int rc = write_all(fd, &h, sizeof h, q) || write_all(fd, payload, (size_t)h.stored_len, q) ? -1 : 0;
    free(z);
    return rc;
}

/* The host part of a snapshot's name, with '/' and ' ' kept out. */
static void host_part(char host[128])
{
    memset(host, 0, 128);
    gethostname(host, 127);
    for (char *c = host; *c; c++)
        if (*c == '/' || *c == ' ')
            *c = '_';
}

/* oomtrace-HOST-PID[-rankR]-TAG.oomt. */
static void snapshot_name(char *path, size_t len, const char *tag, const struct trace_rank *rk)
{
    char host[128];
    host_part(host);
    char rank[32] = "";
    if (rk->rank >= 0)
        snprintf(rank, sizeof rank, "-rank%ld", rk->rank);
    snprintf(path, len, "%s/oomtrace-%s-%d%s-%s.oomt", ot_opt.dir, host, (int)getpid(), rank, tag);
}

/* This run of this process: "r", then start time in ns and 32 random bits in hex (the "r" keeps it from
 * reading as a snapshot's sequence number). Host and pid do not name a run (a
 * container restarts its program as PID 1 again), and a forked child is a run of its own.
 * Made once per process by the one thread that claims it (claim: the pid it is being made for); the
 * others wait for it to be published (pid), never reading it half written (walk 8, #25: two threads that
 * both saw a stale pid wrote it at once while a third read it, and the names could carry a torn id). */
static struct {
    int pid, claim;
    char id[40];
} run;

static const char *run_id(void)
{
    int pid = (int)getpid();
    if (__atomic_load_n(&run.pid, __ATOMIC_ACQUIRE) == pid) {
        ot_tsan_acquire(&run);
        return run.id;
    }
    int was = __atomic_load_n(&run.claim, __ATOMIC_ACQUIRE);
    if (was != pid && __atomic_compare_exchange_n(&run.claim, &was, pid, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint32_t r = 0;
        if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
            r = (uint32_t)ts.tv_nsec ^ (uint32_t)pid << 16; /* no entropy yet: the time still differs */
        snprintf(run.id, sizeof run.id, "r%llx%08x",
                 (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec, r);
        ot_tsan_release(&run);
        __atomic_store_n(&run.pid, pid, __ATOMIC_RELEASE);
        return run.id;
    }
    /* Another thread of this process is making it: a few system calls away. */
    while (__atomic_load_n(&run.pid, __ATOMIC_ACQUIRE) != pid)
        sched_yield();
    ot_tsan_acquire(&run);
    return run.id;
}

/* DIR/.NAME.tmp-RUN-TID beside DIR/NAME: hidden, not a *.oomt, on the same file system so that rename works.
 * NAME carries the snapshot's number and TID the writing thread: threads whose allocations fail together
 * write at the same time, and a name shared by two writes let one remove or publish the other's file. */
static void tmp_name(char *tmp, size_t len, const char *final)
{
    const char *base = strrchr(final, '/');
    int dir = (int)(base - final);
    snprintf(tmp, len, "%.*s/.%s.tmp-%s-%u", dir, final, base + 1, run_id(), (unsigned)ot_tid());
}

/* Hidden temporary files that processes of this host left when they were killed while writing (SIGKILL, a
 * file size limit) hold no evidence: the snapshot was never whole. The first process to write into the
 * directory after them removes them, once. Only those whose writer is gone (its pid names no process) and
 * that have not changed for a minute: a pid of another PID namespace may name nothing here and still be
 * writing. This process's own are never touched (another thread may be writing one). */
#define LEFTOVER_AGE_S 60

static void sweep_leftovers(void)
{
    static int swept;
    if (__atomic_exchange_n(&swept, 1, __ATOMIC_RELAXED))
        return;
    char host[128], prefix[160];
    host_part(host);
    int plen = snprintf(prefix, sizeof prefix, ".oomtrace-%s-", host);
    DIR *d = opendir(ot_opt.dir);
    if (!d || plen <= 0 || (size_t)plen >= sizeof prefix) {
        if (d)
            closedir(d);
        return;
    }
    time_t now = time(NULL);
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        const char *n = e->d_name;
        if (strncmp(n, prefix, (size_t)plen) != 0 || !strstr(n, ".oomt.tmp-r"))
            continue;
        char *end;
        long pid = strtol(n + plen, &end, 10);
        if (end == n + plen || *end != '-' || pid <= 0 || pid == (long)getpid())
            continue;
        struct stat st;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH ||
            fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode) ||
            st.st_mtime > now - LEFTOVER_AGE_S)
            continue;
        unlinkat(dirfd(d), n, 0);
    }
    closedir(d);
}

/* One directory, 0700 whatever the umask: mkdir's mode is masked by it (0277 gave 0500, in which the next level
 * could not be made). Only a directory this call made is changed, and not through a link. */
static int make_one(const char *p)
{
    if (mkdir(p, 0700) != 0)
        return errno == EEXIST ? 0 : errno;
    (void)fchmodat(AT_FDCWD, p, 0700, AT_SYMLINK_NOFOLLOW);
    return 0;
}

/* Creates a missing OOMTRACE_DIR and its missing parents with mode 0700, as heaptrack and PyTorch do for their
 * outputs: users point it at a fresh per-job directory, and finding it missing only at the first OOM, hours
 * later, would lose that snapshot. mkdir never follows a symbolic link as its last component (EEXIST), so a
 * planted link is not created through. No allocation: the path fits ot_opt.dir's size. */
int ot_dir_make(const char *dir)
{
    char p[sizeof ot_opt.dir];
    size_t n = strlen(dir);
    if (n >= sizeof p)
        return ENAMETOOLONG;
    memcpy(p, dir, n + 1);
    for (char *c = p + 1; *c; c++) {
        if (*c != '/')
            continue;
        *c = '\0';
        int err = make_one(p);
        if (err)
            return err;
        *c = '/';
    }
    return make_one(p);
}

/* Never follow a link planted in the directory, never overwrite. The directory made again when it is gone
 * (walk 7, #11): a process that outlives the command that started it (a server started with &, a worker
 * left behind) finds its run directory removed by the launcher, or by a job's cleanup, hours after the
 * first allocation made it; the snapshot it is about to write is the evidence. Made by the same rule as
 * then. When that fails too, errno is the mkdir's (a read-only file system says so, not ENOENT). */
static int create_once(const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0 || errno != ENOENT)
        return fd;
    int made = ot_dir_make(ot_opt.dir);
    if (made) {
        errno = made;
        return -1;
    }
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    /* A directory that is there yet answers "no such file" to a new one (/proc, /sys) takes no files: said so,
     * not as a missing directory. */
    struct stat st;
    if (fd < 0 && errno == ENOENT && stat(ot_opt.dir, &st) == 0 && S_ISDIR(st.st_mode))
        errno = EOPNOTSUPP;
    return fd;
}

/* 0600 whatever the umask, as the directories are 0700 (walk 9, #5): open's mode is masked by it, and under
 * umask 0777 the snapshot was made 000, which the launcher's own reader could not open. */
static int create_private(const char *path)
{
    int fd = create_once(path);
    if (fd >= 0)
        (void)fchmod(fd, 0600);
    return fd;
}

/* Gives the finished file its name, never over another file's: the name takes a suffix when taken. */
static int publish_snapshot(const char *tmp, char *path, size_t len, enum ot_trigger trigger, unsigned seq,
                            const struct trace_rank *rk)
{
    for (unsigned attempt = 0; attempt < 100; attempt++) {
        char tag[48];
        snprintf(tag, sizeof tag, attempt ? "%u-%s.%u" : "%u-%s", seq, file_word(trigger), attempt);
        snapshot_name(path, len, tag, rk);
        int rc = renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE);
        if (rc != 0 && (errno == EINVAL || errno == ENOSYS)) { /* a file system without it: link, unlink */
            rc = link(tmp, path);
            if (rc == 0)
                unlink(tmp);
        }
        if (rc == 0 || errno != EEXIST)
            return rc;
    }
    return -1;
}

/* The crash-surviving trace is one file per run, replaced as a whole at each flush (written beside it,
 * then renamed over it), so a kill at any moment leaves the last flush whole. Its name carries the run id:
 * another run with the same pid neither replaces nor removes it. */
static struct {
    int pid;
    dev_t dev;
    ino_t ino;
} flushed;

static void flush_name(char *path, size_t len, const struct trace_rank *rk)
{
    char tag[64];
    snprintf(tag, sizeof tag, "%s-flush", run_id());
    snapshot_name(path, len, tag, rk);
}

void ot_flush_file_remove(void)
{
    struct trace_rank rk;
    ot_gather_rank(&rk);
    char path[OT_PATH_MAX];
    flush_name(path, sizeof path, &rk);
    struct stat st;
    /* Only the file this process published last: not one put there since, nor a parent's. */
    if (flushed.pid == (int)getpid() && lstat(path, &st) == 0 && st.st_dev == flushed.dev &&
        st.st_ino == flushed.ino)
        unlink(path);
}

int ot_file_write(const struct trace_sections *secs, enum ot_trigger trigger, unsigned seq,
                  const struct trace_rank *rk, char path[OT_PATH_MAX], unsigned long long room,
                  unsigned long long *written)
{
    int flush = trigger == OT_TRIGGER_FLUSH, rc = -1;
    int oom = 0;
    *written = 0;
    for (int i = 0; i < secs->n; i++)
        oom |= secs->s[i].b.oom;
    char tmp[OT_PATH_MAX + 64];
    if (flush) {
        flush_name(path, OT_PATH_MAX, rk);
    } else { /* the name it is meant to have (a line about it names that one), and its number in tmp */
        char tag[48];
        snprintf(tag, sizeof tag, "%u-%s", seq, file_word(trigger));
        snapshot_name(path, OT_PATH_MAX, tag, rk);
    }
    tmp_name(tmp, sizeof tmp, path);
    int fd = -1;
    if (oom) {
        ot_log("not enough memory to build a snapshot (trigger %s); none written", file_word(trigger));
        return -1;
    }
    unlink(tmp); /* a leftover of this very snapshot, under its own name only */
    sweep_leftovers();
    if ((fd = create_private(tmp)) < 0) {
        /* Said at the failure, once per kind of snapshot: the line at the first allocation may be hours
         * before the out-of-memory it was about. The flush, every second, stays quiet after that line. */
        unsigned bit = 1u << ((unsigned)trigger & 31);
        if (flush ? !ot_dir_warned && !__atomic_exchange_n(&warned_flush, 1, __ATOMIC_RELAXED)
                  : !(__atomic_fetch_or(&warned_create, bit, __ATOMIC_RELAXED) & bit))
            ot_log("cannot write the %s snapshot to %s: %s", trigger_words(trigger), ot_opt.dir, strerror(errno));
        return -1;
    }
    /* The header says COMPLETE only once everything after it is written, and the file has its name only
     * then: a write cut off leaves a hidden temporary file, never a snapshot that reads as whole. A flush is
     * not a finished file: if it is what remains, the process did not finish. */
    struct ot_file_header fh = {.version_major = OT_VERSION_MAJOR, .version_minor = OT_VERSION_MINOR, .flags = 0};
    memcpy(fh.magic, OT_MAGIC, 8);
    /* A file size limit (`ulimit -f`, a batch system's) fails the write with EFBIG and the line below;
     * its SIGXFSZ would have ended a program that caught its OOM (walk 8, #26). */
    struct ot_nosig q;
    ot_nosig_begin(&q);
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    int bad = write_all(fd, &fh, sizeof fh, &q), no_room = 0;
    for (int i = 0; i < secs->n && !bad; i++) {
        bad = write_section(fd, &secs->s[i], cctx, &q);
        off_t at = lseek(fd, 0, SEEK_CUR);
        if (!bad && room && at > 0 && (unsigned long long)at > room)
            bad = no_room = 1;
    }
    ZSTD_freeCCtx(cctx);
    if (!bad && !flush) {
        fh.flags = OT_FILE_COMPLETE;
        bad = pwrite(fd, &fh, sizeof fh, 0) != (ssize_t)sizeof fh;
        if (bad)
            ot_nosig_saw(&q, errno);
    }
    int err = errno;
    ot_nosig_end(&q);
    struct stat st;
    if (!bad && fstat(fd, &st) != 0) {
        bad = 1;
        err = errno;
    }
    if (close(fd) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    if (!bad && (flush ? rename(tmp, path) : publish_snapshot(tmp, path, OT_PATH_MAX, trigger, seq, rk)) != 0) {
        bad = 1;
        err = errno;
    }
    if (bad) {
        unlink(tmp);
        if (no_room)
            return OT_FILE_NO_ROOM;
        if (!flush || !__atomic_exchange_n(&warned_flush, 1, __ATOMIC_RELAXED))
            ot_log("cannot write snapshot %s: %s; removed the partial file", path, strerror(err));
    } else if (flush) {
        flushed.dev = st.st_dev;
        flushed.ino = st.st_ino;
        flushed.pid = (int)getpid();
        rc = 0;
    } else {
        rc = 0;
        *written = (unsigned long long)st.st_size;
        if (!ot_opt.quiet)
            ot_log("snapshot written: %s (%s)", path, file_word(trigger));
    }
    return rc;
}
