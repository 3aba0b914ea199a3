/* CI gates: --max-peak SIZE fails when the peak (the largest device peak of a snapshot; with a
 * directory, of its worst snapshot) exceeds SIZE; --baseline SNAPSHOT --max-growth PCT fails when that
 * peak grew by more than PCT percent over the baseline's. One line on stderr per gate, passed or failed
 * (a CI log shows the gate ran and what it measured); exit status 1 when one failed; bad input is the
 * caller's exit 2. */
#ifndef OT_READ_GATE_H
#define OT_READ_GATE_H

#include "modes/load.h"

struct ot_gate {
    bool max_peak_set;
    uint64_t max_peak;
    const char *baseline; /* a snapshot or a directory; NULL */
    bool growth_set;
    double max_growth; /* percent */
    const char *speaker; /* the program name a gate's line starts with; NULL: oomtrace-read */
};

/* The peak a gate measures, and where it was found. */
struct ot_gate_peak {
    bool known;
    uint64_t bytes;
    int64_t device;
    char path[1024];
    size_t nfiles, nprocs, nbad; /* a directory's: the snapshots read, the processes they came from, the files
                                  * that could not be read */
};

#define OT_GATE_MSG 640
struct ot_gate_result {
    int rc; /* 0 passed (or no gate), 1 failed */
    const char *speaker; /* the gate's, copied */
    size_t nmsg; /* one line per gate evaluated, "gate --X passed: ..." or "gate --X failed: ..." */
    char msg[2][OT_GATE_MSG];
};

/* "123", "8G", "1.5GiB", "512M", "64KiB", "1T": K, M, G, T with or without "i" and "B" are powers of
 * 1024. 0 or -1 when malformed or above 2^63. */
int ot_parse_size(const char *s, uint64_t *out);
/* "10", "2.5", "10%": 0 or -1 (negative, not a number, above 1e9). */
int ot_parse_percent(const char *s, double *out);

bool ot_gate_active(const struct ot_gate *g);

/* The peak of one analysis, for a gate. */
void ot_gate_peak_of_analysis(const struct ot_analysis *a, const char *path, struct ot_gate_peak *p);
/* The peak of a file or directory (the worst readable snapshot, named in p->path; the first readable one when
 * none has a known peak): 0, or -1 with errbuf. */
int ot_gate_peak_of_path(const char *path, const struct ot_load_opts *o, struct ot_gate_peak *p, char errbuf[OT_ERRBUF]);

/* Evaluates the gates against peak (and base for --max-growth; base may be NULL when no growth gate). */
void ot_gate_eval(const struct ot_gate *g, const struct ot_gate_peak *peak, const struct ot_gate_peak *base,
                  struct ot_gate_result *r);
/* Prints the result's lines on stderr ("oomtrace-read: gate ... passed: ..." or "... failed: ...", the speaker instead of
 * oomtrace-read) and returns its rc. */
int ot_gate_report(const struct ot_gate_result *r);

#endif
