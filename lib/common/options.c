/* Options: one table, each read once from OOMTRACE_<NAME> at start-up. An invalid value prints one
 * line and keeps the default; the traced program never sees an error for it. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/defs.h"
#include "common/log.h"
#include "common/options.h"

struct ot_options ot_opt;

enum opt_kind { OPT_BOOL, OPT_INT, OPT_SIZE, OPT_DIR, OPT_DUMP, OPT_SIGNAL };

struct opt {
    const char *name; /* environment variable */
    enum opt_kind kind;
    const char *def;   /* default, parsed like a user value */
    long long lo, hi;  /* range for OPT_INT and OPT_SIZE */
    void *dst;
};

static const struct opt table[] = {
    {"OOMTRACE_DISABLE", OPT_BOOL, "0", 0, 1, &ot_opt.disabled},               /* pass everything through */
    {"OOMTRACE_RING", OPT_SIZE, "64M", 4096, (1LL << 40), &ot_opt.ring_bytes}, /* compressed event ring */
    {"OOMTRACE_DIR", OPT_DIR, ".", 0, 0, ot_opt.dir},                          /* where snapshots go */
    {"OOMTRACE_DUMP", OPT_DUMP, "oom", 0, 0, NULL},               /* oom,exit,crash, or none alone: when to write */
    {"OOMTRACE_SIGNAL", OPT_SIGNAL, "", 0, 0, &ot_opt.signal},    /* e.g. USR1: snapshot on signal */
    {"OOMTRACE_DEPTH", OPT_INT, "64", 1, OT_MAX_FRAMES - 16, &ot_opt.depth},   /* native frames */
    {"OOMTRACE_MAX_SNAPSHOTS", OPT_INT, "100", 0, 1000000, &ot_opt.max_snapshots}, /* 0: no count cap */
    {"OOMTRACE_MAX_BYTES", OPT_SIZE, "1G", 0, (1LL << 50), &ot_opt.max_bytes}, /* snapshot bytes; 0: no cap */
    {"OOMTRACE_PYTHON", OPT_BOOL, "1", 0, 1, &ot_opt.python},    /* read Python frames */
    {"OOMTRACE_FLUSH_MS", OPT_INT, "1000", 10, 3600000, &ot_opt.flush_ms},
    {"OOMTRACE_QUIET", OPT_BOOL, "0", 0, 1, &ot_opt.quiet},      /* no line per snapshot */
    {"OOMTRACE_FRAMEWORKS", OPT_BOOL, "1", 0, 1, &ot_opt.frameworks}, /* the Python companion */
    {"OOMTRACE_TSC", OPT_BOOL, "1", 0, 1, &ot_opt.tsc},           /* 0: clock_gettime for every time */
    {"OOMTRACE_HUGE_PAGES", OPT_BOOL, "1", 0, 1, &ot_opt.huge_pages}, /* 0: tables stay on 4 KiB pages */
    {"OOMTRACE_LOCK_OWNER", OPT_BOOL, "1", 0, 1, &ot_opt.lock_owner}, /* 0: every take is the exchange */
};

static int parse_size(const char *s, long long *out)
{
    /* Digits and a decimal point only, as in "1.5G": strtod alone also took " 1", "0x10", "1e3" and "nan"
     * (then cast to an integer, which is undefined; helper-91 #7). */
    size_t digits = strspn(s, "0123456789.");
    char *end;
    errno = 0;
    double v = digits ? strtod(s, &end) : 0;
    if (!digits || end != s + digits || errno || v < 0)
        return -1;
    double mul = 1;
    switch (toupper((unsigned char)*end)) {
    case 'K': mul = 1024.0; end++; break;
    case 'M': mul = 1024.0 * 1024; end++; break;
    case 'G': mul = 1024.0 * 1024 * 1024; end++; break;
    case 'T': mul = 1024.0 * 1024 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end == 'i' || *end == 'I')
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end)
        return -1;
    v *= mul;
    if (v > 9.0e18)
        return -1;
    *out = (long long)v;
    return 0;
}

/* The signals a fault raises: a handler that returns from one re-runs the faulting instruction, so a
 * snapshot handler on it would turn a crash into an endless loop of snapshots. */
static int fatal_signal(int sig)
{
    return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGTRAP ||
           sig == SIGSYS || sig == SIGABRT;
}

static int parse_signal(const char *s, int *out)
{
    static const struct { const char *name; int sig; } sigs[] = {
        {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP}, {"INT", SIGINT},
        {"TERM", SIGTERM}, {"QUIT", SIGQUIT}, {"PROF", SIGPROF}, {"URG", SIGURG},
    };
    if (!*s) {
        *out = 0;
        return 0;
    }
    if (strncasecmp(s, "SIG", 3) == 0)
        s += 3;
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (strcasecmp(s, sigs[i].name) == 0) {
            *out = sigs[i].sig;
            return 0;
        }
    char *end;
    long v = strtol(s, &end, 10);
    if (isdigit((unsigned char)*s) && !*end && v > 0 && v < NSIG && v != SIGKILL && v != SIGSTOP && !fatal_signal((int)v)) {
        *out = (int)v;
        return 0;
    }
    return -1;
}

static int parse_dump(const char *s)
{
    int exit_ = 0, crash = 0, oom = 0, none = 0;
    const char *p = s;
    while (*p) {
        size_t n = strcspn(p, ",: ");
        if (n == 4 && strncmp(p, "exit", 4) == 0)
            exit_ = 1;
        else if (n == 5 && strncmp(p, "crash", 5) == 0)
            crash = 1;
        else if (n == 3 && strncmp(p, "oom", 3) == 0)
            oom = 1;
        else if (n == 4 && strncmp(p, "none", 4) == 0)
            none = 1;
        else if (n)
            return -1;
        p += n;
        if (*p)
            p++;
    }
    /* "none" with anything else is a contradiction: read as "no OOM snapshots", exit,none silently lost the
     * snapshot the tracer exists for. Refused instead (one line, the default kept). */
    if (none && (exit_ || crash || oom))
        return -1;
    ot_opt.dump_exit = exit_;
    ot_opt.dump_crash = crash;
    /* A failure is the reason to run the tracer: "exit" alone still keeps OOM snapshots; only
     * "none" turns them off. */
    ot_opt.dump_oom = oom || !none;
    return 0;
}

/* What the shell would have expanded in OOMTRACE_DIR: a value set where no shell runs (docker -e, a Kubernetes
 * env entry, systemd's Environment=, os.environ in Python) kept "~/snaps" literally, and the library made a
 * directory named "~" in the current one, which a later "rm -rf ~*" typed to clean it removes the home with.
 * "~" and "~/..." are taken from HOME; "~user" and "$VAR" (which need the password database or the shell)
 * are refused. Returns the value to use (v, or exp), or NULL with *why set. */
static const char *expand_dir(const char *v, char exp[sizeof ot_opt.dir], const char **why)
{
    const char *dollar = strchr(v, '$');
    if (dollar && (dollar[1] == '{' || dollar[1] == '_' || isalpha((unsigned char)dollar[1]))) {
        *why = "holds a '$' variable that no shell expanded: give the path itself";
        return NULL;
    }
    if (v[0] != '~')
        return v;
    const char *home = getenv("HOME");
    if (v[1] && v[1] != '/') {
        *why = "starts with '~user', which no shell expanded: give the path itself";
        return NULL;
    }
    if (!home || home[0] != '/') {
        *why = "starts with '~', which no shell expanded, and HOME is not an absolute path: give the path itself";
        return NULL;
    }
    int n = snprintf(exp, sizeof ot_opt.dir, "%s%s", home, v + 1);
    if (n < 0 || (size_t)n >= sizeof ot_opt.dir) {
        *why = "is too long once '~' is HOME";
        return NULL;
    }
    return exp;
}

/* OOMTRACE_DIR, made absolute against the directory the process started in: a program that changes directory
 * (Hydra's per-run directory, os.chdir to a checkpoint dir) lost the snapshot of a relative OOMTRACE_DIR, or
 * had it follow the chdir; and the "snapshot written" line then says where the file is. When the start-up
 * directory cannot be named (removed, too long), the value stays as given. */
static int set_dir(char dst[sizeof ot_opt.dir], const char *v)
{
    if (v[0] != '/') {
        char cwd[sizeof ot_opt.dir];
        if (getcwd(cwd, sizeof cwd) && cwd[0] == '/') {
            while (v[0] == '.' && (v[1] == '/' || !v[1])) { /* ./x is x; . is the directory itself */
                v += v[1] ? 2 : 1;
                while (*v == '/')
                    v++;
            }
            int n = snprintf(dst, sizeof ot_opt.dir, "%s%s%s", cwd, *v && strcmp(cwd, "/") ? "/" : "", v);
            if (n > 0 && (size_t)n < sizeof ot_opt.dir)
                return 0;
        }
    }
    strcpy(dst, v);
    return 0;
}

static const char *dir_why; /* why apply refused an OOMTRACE_DIR (-3) */

static int apply(const struct opt *o, const char *v)
{
    long long n;
    switch (o->kind) {
    case OPT_BOOL:
        if (strcmp(v, "1") == 0 || strcasecmp(v, "yes") == 0 || strcasecmp(v, "true") == 0 ||
            strcasecmp(v, "on") == 0)
            *(int *)o->dst = 1;
        else if (strcmp(v, "0") == 0 || strcasecmp(v, "no") == 0 || strcasecmp(v, "false") == 0 ||
                 strcasecmp(v, "off") == 0 || !*v)
            *(int *)o->dst = 0;
        else
            return -1;
        return 0;
    case OPT_INT: {
        char *end;
        errno = 0;
        n = strtoll(v, &end, 10);
        /* Digits, or a minus and digits (then said to be below the minimum): strtoll alone took " 1" and "+1". */
        if (!isdigit((unsigned char)(*v == '-' ? v[1] : *v)) || *end || errno)
            return -1;
        if (n < o->lo || n > o->hi)
            return -2;
        if (o->dst == &ot_opt.flush_ms)
            *(unsigned *)o->dst = (unsigned)n;
        else
            *(int *)o->dst = (int)n;
        return 0;
    }
    case OPT_SIZE:
        if (parse_size(v, &n))
            return -1;
        if (n < o->lo || n > o->hi)
            return -2;
        *(size_t *)o->dst = (size_t)n;
        return 0;
    case OPT_DIR: {
        char exp[sizeof ot_opt.dir];
        if (!(v = expand_dir(v, exp, &dir_why)))
            return -3;
        if (strlen(v) >= sizeof ot_opt.dir) {
            dir_why = "is longer than the 511 bytes a snapshot's directory may have";
            return -3;
        }
        return set_dir((char *)o->dst, v);
    }
    case OPT_DUMP:
        return parse_dump(v);
    case OPT_SIGNAL:
        return parse_signal(v, (int *)o->dst);
    }
    return -1;
}

/* A bound as the user would write it: 4096 as "4K" for a size, a plain number otherwise. */
static void limit_text(const struct opt *o, long long v, char out[32])
{
    static const char unit[] = "KMGT";
    int u = -1;
    while (o->kind == OPT_SIZE && v && u < 3 && v % 1024 == 0) {
        v /= 1024;
        u++;
    }
    if (u >= 0)
        snprintf(out, 32, "%lld%c", v, unit[u]);
    else
        snprintf(out, 32, "%lld", v);
}

void ot_options_load(void)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const struct opt *o = &table[i];
        apply(o, o->def);
        const char *v = getenv(o->name);
        /* Empty is unset, for every variable, silently: a CI template's OOMTRACE_RING=${RING} with RING unset. */
        int rc = v && *v ? apply(o, v) : 0;
        if (o->kind == OPT_DIR)
            ot_opt.dir_given = v && *v && rc == 0;
        if (rc == -3) { /* an OOMTRACE_DIR that cannot be used as given: why, not only "invalid" */
            ot_log("%s=\"%.64s%s\" %s; using the default \"%s\"", o->name, v, strlen(v) > 64 ? "..." : "",
                   dir_why, o->def);
            apply(o, o->def);
        } else if (rc == -2) { /* well-formed, out of range: say the bound, in the syntax the user wrote */
            long long n = 0;
            if (o->kind == OPT_SIZE)
                parse_size(v, &n);
            else
                n = strtoll(v, NULL, 10);
            char bound[32];
            limit_text(o, n < o->lo ? o->lo : o->hi, bound);
            ot_log("%s=\"%.64s\" is %s its %s, %s; using the default \"%s\"", o->name, v,
                   n < o->lo ? "below" : "above", n < o->lo ? "minimum" : "maximum", bound, o->def);
            apply(o, o->def);
        } else if (rc != 0 && !*o->def) { /* OOMTRACE_SIGNAL: the default is none, not "" */
            ot_log("invalid %s=\"%.64s\"; ignored, as if unset", o->name, v);
            apply(o, o->def);
        } else if (rc != 0) {
            ot_log("invalid %s=\"%.64s\"; using the default \"%s\"", o->name, v, o->def);
            apply(o, o->def);
        }
    }
}
