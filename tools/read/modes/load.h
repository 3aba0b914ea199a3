/* One snapshot, read, parsed, symbolized and analysed, for the modes that read more than one file
 * (--diff, a directory, --baseline). Errors come back as one line of text, never as an exit. */
#ifndef OT_READ_LOAD_H
#define OT_READ_LOAD_H

#include "analyze/analysis.h"
#include "render/report.h"

struct ot_load_opts {
    bool symbolize;
    const char *const *debug_dirs;
    size_t ndebug;
    /* Set for the files of a directory scan: a FIFO or device found there is refused, never opened for
     * reading (a FIFO named *.oomt would wait for a writer). Files the user names may be streams. */
    bool regular_only;
};

struct ot_loaded {
    const char *path;
    uint8_t *buf;
    size_t len;
    struct ot_snapshot snap;
    struct ot_symbolizer *sym;
    struct ot_resolver *res;
    struct ot_analysis an;
    bool parsed, analyzed;
    /* Set by --diff when the snapshot was picked from a directory (its largest peak), for the report to say so:
     * dir NULL otherwise. */
    struct {
        const char *dir;
        size_t nfiles, nprocs, nbad;
    } picked;
};

/* 0, or -1 with one line in errbuf (the file's name is not in it). On -1, *l needs no freeing but
 * ot_loaded_free is still safe. */
/* Reads a whole file, or standard input for "-", into a malloc'd buffer. Returns 0, or -1 with the reason
 * (without the path) in err. Files over 64 GiB are refused. */
int ot_read_file(const char *path, bool regular_only, uint8_t **out, size_t *len, char err[OT_ERRBUF]);
int ot_load(struct ot_loaded *l, const char *path, const struct ot_load_opts *o, char errbuf[OT_ERRBUF]);
void ot_loaded_free(struct ot_loaded *l);

/* The largest peak over the analysis's devices (0 with *device = -1 when none is known). */
uint64_t ot_max_peak(const struct ot_analysis *a, int64_t *device);

/* True when path names a directory. */
bool ot_is_dir(const char *path);

/* The *.oomt files of a directory, sorted by name, as malloc'd full paths (free with ot_strv_free).
 * -1 with errbuf when the directory cannot be read. */
int ot_list_snapshots(const char *dir, char ***paths, size_t *n, char errbuf[OT_ERRBUF]);

/* The line for a directory without a snapshot. `oomtrace run --dir D` writes into D/run-ID directories,
 * so a user who then reads D is told which run directories it holds (the latest by name: by start time). */
void ot_no_snapshot_msg(const char *dir, char errbuf[OT_ERRBUF]);

#endif
