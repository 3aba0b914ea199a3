/* oomtrace-supervise: the launcher's process while the traced command runs (tools/oomtrace execs it).
 *
 *     oomtrace-supervise [--env NAME=VALUE]... --then N WORD... -- CMD [ARG]...
 *
 * Runs CMD as its child with the NAME=VALUE variables added (the child only: this process is never traced),
 * passes on to it the signals sent to this process, waits for it, then execs the N WORDs (the launcher's
 * report) with four more: CMD's status as a shell gives it (the exit code, or 128 + the signal), the
 * number of the signal that ended it (0 when it exited), CMD's process id (whose snapshots are CMD's own),
 * and the number of the last signal passed on to CMD (0 when none was).
 *
 * Why a program and not the shell: the launcher's process id is the one a supervisor, a job script's
 * `kill PID` or a CI runner's cancel signals. A shell waiting for a foreground command runs its traps only
 * once the command is over, so a SIGTERM stopped the launcher and left the command running, orphaned; and
 * a shell's background command ignores SIGINT and SIGQUIT and reads /dev/null, which the command would see.
 * Here the process id stays the launcher's across both execs, and CMD gets the signal dispositions, mask
 * and standard input the launcher had, as it would untraced.
 *
 * A signal is passed on only when a process sent it (kill, sigqueue) to this process alone. One the terminal
 * sends (Ctrl-C, a hangup) goes to the whole foreground process group, CMD included: passing it on would
 * deliver it twice. So does one a process sends to the whole process group (GNU timeout, kill -TERM -- -PGID,
 * supervisord) or to every process of a control group (Slurm, systemd): CMD has it from its sender, and a
 * second one would enter its handler again, abandoning a checkpoint half saved (walk 9, #8). Which of the two
 * a signal was cannot be read from its siginfo (both are SI_USER from the same sender), so a witness tells:
 * a process forked from this one, in its process group, session and control group as CMD starts, which only
 * takes the signals and says which came (and from whom). A signal this process got and the witness did not
 * (within GRACE_MS, the time a sender takes to go through a group's processes) was sent to this process
 * alone, and is passed on; one the witness got too reached CMD, and is not. A witness that is gone (killed by
 * hand) leaves every signal passed on, as before.
 * A signal that was ignored when the launcher started stays ignored, for CMD too.
 *
 * A SIGKILL cannot be caught and passed on: CMD is made to get SIGTERM when this process dies
 * (PR_SET_PDEATHSIG, kept across CMD's exec, not inherited by CMD's own children), so a launcher killed
 * outright does not leave CMD running orphaned.
 *
 * Its command line, as ps and pgrep -f read it, is rewritten to "oomtrace run -- CMD [ARG]..." (and its name
 * to "oomtrace"): a user looks for the launcher as they started it (pgrep -f "oomtrace run", walk 10, #2),
 * not for this program's internal arguments. The witness's is rewritten to "oomtrace-watch", so that a
 * pkill -f "oomtrace run" reaches the launcher alone: a signal the witness got too would be taken for one
 * sent to the whole group, and not passed on. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const int passed_on[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};
static const char *const passed_name[] = {"SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2"};
#define NPASSED (sizeof passed_on / sizeof passed_on[0])
/* How long a signal this process got waits for the witness's word before it is passed on: a sender goes
 * through a group's processes in one system call (a process group) or in a loop of kill calls (a control
 * group's), microseconds apart, and the witness's pending signal is seen even before it runs. */
#define GRACE_MS 250

struct heard { /* a signal and its sender, and when it was heard (ms) */
    int sig;
    pid_t from;
    int64_t at;
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The command line's bytes (argv's strings, one after the other), which /proc/PID/cmdline shows. */
static char *title_at;
static size_t title_len;
static char **kept; /* keep_args's copy, held till the end (reachable, for LeakSanitizer) */

/* A copy of argv that the rewriting of its bytes leaves alone; title_at set when its strings are contiguous. */
static char **keep_args(int argc, char **argv)
{
    char **copy = kept = calloc((size_t)argc + 1, sizeof *copy);
    if (!copy)
        return argv;
    char *next = argv[0];
    int contiguous = 1;
    for (int k = 0; k < argc; k++) {
        if (!(copy[k] = strdup(argv[k])))
            return argv;
        contiguous = contiguous && argv[k] == next;
        next = argv[k] + strlen(argv[k]) + 1;
    }
    if (contiguous && argc > 0) {
        title_at = argv[0];
        title_len = (size_t)(next - argv[0]);
    }
    return copy;
}

/* The command line becomes WORDS (NULL-ended), as far as its bytes go; the rest is zeroed. */
static void set_title(const char *const *words)
{
    if (!title_at || title_len < 2)
        return;
    memset(title_at, 0, title_len);
    size_t at = 0;
    for (int k = 0; words[k] && at + 1 < title_len; k++) {
        size_t n = strlen(words[k]);
        if (n > title_len - 1 - at)
            n = title_len - 1 - at;
        memcpy(title_at + at, words[k], n);
        at += n + 1;
    }
}

/* The witness: takes the signals in SET (blocked here, as inherited) and writes each, with its sender, to FD.
 * It holds nothing else open, so that a pipe the launcher writes to is not kept open by it. */
static void witness(const sigset_t *set, int fd)
{
    prctl(PR_SET_NAME, "oomtrace-watch");
    set_title((const char *const[]){"oomtrace-watch", NULL});
    if (fd != 3) {
        dup2(fd, 3);
        fd = 3;
    }
    for (int k = 0; k < 3; k++)
        close(k);
#ifdef SYS_close_range
    if (syscall(SYS_close_range, 4U, ~0U, 0U) != 0)
#endif
        for (int k = 4; k < 4096; k++)
            close(k);
    for (;;) {
        siginfo_t si;
        int sig = sigwaitinfo(set, &si);
        if (sig < 0)
            continue;
        struct heard h = {sig, si.si_pid, 0};
        if (write(fd, &h, sizeof h) < 0 && errno == EPIPE)
            _exit(0);
    }
}

/* 1 when SIG is pending in process PID (its mask blocks it): sent, not yet taken by sigwaitinfo. */
static int pending_in(pid_t pid, int sig)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    const char *keys[] = {"\nSigPnd:", "\nShdPnd:"};
    for (int k = 0; k < 2; k++) {
        const char *p = strstr(buf, keys[k]);
        if (p && (strtoull(p + strlen(keys[k]), NULL, 16) >> (sig - 1) & 1))
            return 1;
    }
    return 0;
}

static int usage(const char *why)
{
    fprintf(stderr, "oomtrace-supervise: %s (it is run by the oomtrace launcher, not by hand)\n", why);
    return 2;
}

int main(int argc, char **argv)
{
    argv = keep_args(argc, argv);
    int i = 1;
    int first_env = 0, nenv = 0;
    while (i < argc && strcmp(argv[i], "--env") == 0 && i + 1 < argc && strchr(argv[i + 1], '=')) {
        if (!nenv)
            first_env = i;
        nenv++;
        i += 2;
    }
    if (i + 1 >= argc || strcmp(argv[i], "--then") != 0)
        return usage("--then N WORD... missing");
    char *end;
    long nthen = strtol(argv[i + 1], &end, 10);
    if (*end || nthen < 1 || nthen > argc - i - 3)
        return usage("--then needs a count of the words after it");
    char **then = argv + i + 2;
    i += 2 + (int)nthen;
    if (i >= argc || strcmp(argv[i], "--") != 0 || i + 1 >= argc)
        return usage("-- CMD missing");
    char **cmd = argv + i + 1;
    {
        int ncmd = argc - i - 1;
        const char **title = calloc((size_t)ncmd + 3, sizeof *title);
        if (title) {
            title[0] = "oomtrace run";
            title[1] = "--";
            memcpy(title + 2, cmd, (size_t)ncmd * sizeof *title);
            set_title(title);
            free(title);
        }
        prctl(PR_SET_NAME, "oomtrace");
    }

    /* The signals to pass on (those not ignored) and SIGCHLD are blocked before the forks and read from a
     * signalfd: one that arrives before CMD's pid is known is passed on then, never lost and never fatal to
     * the launcher alone. No handler is installed, so CMD starts with the launcher's dispositions. */
    sigset_t fwd, block, mask;
    sigemptyset(&fwd);
    char said[NPASSED][320]; /* the line said on passing each signal on */
    for (size_t k = 0; k < NPASSED; k++) {
        struct sigaction sa;
        if (sigaction(passed_on[k], NULL, &sa) == 0 && sa.sa_handler == SIG_IGN && !(sa.sa_flags & SA_SIGINFO))
            continue;
        sigaddset(&fwd, passed_on[k]);
        int n = snprintf(said[k], sizeof said[k], "oomtrace: %s passed on to %s; its report follows when it ends\n",
                         passed_name[k], cmd[0]);
        if (n >= (int)sizeof said[k]) /* a long command path: the line still ends */
            said[k][sizeof said[k] - 2] = '\n';
    }
    block = fwd;
    sigaddset(&block, SIGCHLD);
    sigprocmask(SIG_BLOCK, &block, &mask);
    /* A launcher started with SIGCHLD ignored would have its children reaped by the kernel, and CMD's status
     * lost: the default here, the ignored one given back to CMD. */
    struct sigaction chld_old;
    int chld_ign = sigaction(SIGCHLD, NULL, &chld_old) == 0 && chld_old.sa_handler == SIG_IGN &&
                   !(chld_old.sa_flags & SA_SIGINFO);
    if (chld_ign) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        sigaction(SIGCHLD, &dfl, NULL);
    }
    int sfd = signalfd(-1, &block, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0) {
        fprintf(stderr, "oomtrace: cannot start %s: signalfd: %s\n", cmd[0], strerror(errno));
        return 2;
    }

    fflush(NULL);
    pid_t self = getpid();
    /* The witness (see above), started before CMD. Without it (no pipe, no fork) every signal is passed on. */
    int wp[2] = {-1, -1};
    pid_t wpid = -1;
    if (!sigisemptyset(&fwd) && pipe2(wp, O_CLOEXEC) == 0) {
        wpid = fork();
        if (wpid == 0) {
            if (prctl(PR_SET_PDEATHSIG, SIGKILL) == 0 && getppid() != self)
                _exit(0);
            close(wp[0]);
            witness(&fwd, wp[1]);
        }
        close(wp[1]);
        if (wpid < 0) {
            close(wp[0]);
            wp[0] = -1;
        } else {
            fcntl(wp[0], F_SETFL, O_NONBLOCK);
        }
    }

    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "oomtrace: cannot start %s: %s\n", cmd[0], strerror(errno));
        if (wpid > 0)
            kill(wpid, SIGKILL);
        return 2;
    }
    if (pid == 0) {
        if (chld_ign)
            sigaction(SIGCHLD, &chld_old, NULL);
        sigprocmask(SIG_SETMASK, &mask, NULL);
        /* A launcher killed outright (SIGKILL: the OOM killer, a CI runner's hard cancel, kill -9 PID) cannot
         * pass anything on: CMD gets SIGTERM, as it would from the launcher, instead of running on orphaned
         * with its GPU memory held. The launcher may have died before the prctl: then CMD is not started. */
        if (prctl(PR_SET_PDEATHSIG, SIGTERM) == 0 && getppid() != self)
            _exit(128 + SIGTERM);
        for (int e = 0; e < nenv; e++) {
            char *kv = argv[first_env + 2 * e + 1];
            char *eq = strchr(kv, '=');
            *eq = '\0';
            setenv(kv, eq + 1, 1);
        }
        execvp(cmd[0], cmd);
        int err = errno;
        fprintf(stderr, "oomtrace: %s: %s\n", cmd[0], strerror(err));
        _exit(err == ENOENT ? 127 : 126);
    }
    /* The line said on passing a signal on goes to the launcher's standard error, which may be a pipe whose
     * reader has gone (CMD 2>&1 | head -1): it must not end the launcher by SIGPIPE before CMD's status is
     * known. Ignored here only, CMD having started with the launcher's dispositions; the report gets them back. */
    struct sigaction pipe_ign, pipe_old;
    memset(&pipe_ign, 0, sizeof pipe_ign);
    pipe_ign.sa_handler = SIG_IGN;
    int pipe_set = sigaction(SIGPIPE, &pipe_ign, &pipe_old) == 0;

    /* Signals heard here and not yet judged, and the witness's recent ones (kept for 2 GRACE_MS). */
    struct heard waiting[32], seen[32];
    int nwaiting = 0, nseen = 0, last_passed = 0;
    int status = 0, ended = 0;
    while (!ended) {
        int64_t t = now_ms();
        int timeout = -1;
        for (int k = 0; k < nwaiting; k++) {
            int64_t left = waiting[k].at + GRACE_MS - t;
            /* polled every 10 ms for the witness's pending signals meanwhile */
            int ms = left < 0 ? 0 : left > 10 ? 10 : (int)left;
            if (timeout < 0 || ms < timeout)
                timeout = ms;
        }
        struct pollfd pf[2] = {{sfd, POLLIN, 0}, {wp[0], POLLIN, 0}};
        if (poll(pf, wp[0] >= 0 ? 2 : 1, timeout) < 0 && errno != EINTR)
            break;
        t = now_ms();
        struct signalfd_siginfo si;
        int chld = 0;
        while (read(sfd, &si, sizeof si) == (ssize_t)sizeof si) {
            if ((int)si.ssi_signo == SIGCHLD) {
                chld = 1;
                continue;
            }
            /* sent by the kernel (the terminal): CMD has it already */
            if (si.ssi_code > 0 || !sigismember(&fwd, (int)si.ssi_signo))
                continue;
            if (nwaiting == (int)(sizeof waiting / sizeof waiting[0]))
                memmove(waiting, waiting + 1, --nwaiting * sizeof waiting[0]);
            waiting[nwaiting++] = (struct heard){(int)si.ssi_signo, (pid_t)si.ssi_pid, t};
        }
        if (wp[0] >= 0) {
            struct heard h;
            ssize_t n;
            while ((n = read(wp[0], &h, sizeof h)) == (ssize_t)sizeof h) {
                if (nseen == (int)(sizeof seen / sizeof seen[0]))
                    memmove(seen, seen + 1, --nseen * sizeof seen[0]);
                h.at = t;
                seen[nseen++] = h;
            }
            if (n == 0) { /* the witness is gone: every signal is passed on from now */
                close(wp[0]);
                wp[0] = -1;
            }
        }
        for (int k = 0; k < nseen;)
            if (seen[k].at + 2 * GRACE_MS < t)
                memmove(seen + k, seen + k + 1, (size_t)(--nseen - k) * sizeof seen[0]);
            else
                k++;
        for (int k = 0; k < nwaiting;) {
            struct heard w = waiting[k];
            int group = 0;
            for (int j = 0; j < nseen && !group; j++)
                group = seen[j].sig == w.sig && seen[j].from == w.from;
            /* Pending in the witness: sent, not yet taken (its sender unknown: taken as the same one). */
            if (!group && wp[0] >= 0 && wpid > 0)
                group = pending_in(wpid, w.sig);
            if (!group && wp[0] >= 0 && t < w.at + GRACE_MS) {
                k++;
                continue;
            }
            if (!group && kill(pid, w.sig) == 0) {
                last_passed = w.sig;
                for (size_t m = 0; m < NPASSED; m++)
                    if (passed_on[m] == w.sig && write(2, said[m], strlen(said[m])) < 0)
                        break;
            }
            memmove(waiting + k, waiting + k + 1, (size_t)(--nwaiting - k) * sizeof waiting[0]);
        }
        if (chld || timeout < 0) {
            pid_t got = waitpid(pid, &status, WNOHANG);
            if (got == pid || (got < 0 && errno != EINTR))
                ended = got == pid ? 1 : -1;
            if (wpid > 0 && waitpid(wpid, NULL, WNOHANG) == wpid)
                wpid = 0;
        }
    }
    if (wpid > 0) {
        kill(wpid, SIGKILL);
        waitpid(wpid, NULL, 0);
    }
    if (wp[0] >= 0)
        close(wp[0]);
    close(sfd);
    int code = 1, sig = 0;
    if (ended == 1 && WIFEXITED(status))
        code = WEXITSTATUS(status);
    else if (ended == 1 && WIFSIGNALED(status)) {
        sig = WTERMSIG(status);
        code = 128 + sig;
    }

    /* The report runs with the launcher's own dispositions and mask again. */
    if (chld_ign)
        sigaction(SIGCHLD, &chld_old, NULL);
    if (pipe_set)
        sigaction(SIGPIPE, &pipe_old, NULL);
    sigprocmask(SIG_SETMASK, &mask, NULL);
    char codes[4][16];
    snprintf(codes[0], sizeof codes[0], "%d", code);
    snprintf(codes[1], sizeof codes[1], "%d", sig);
    snprintf(codes[2], sizeof codes[2], "%d", (int)pid);
    snprintf(codes[3], sizeof codes[3], "%d", last_passed);
    char **next = calloc((size_t)nthen + 5, sizeof *next);
    if (next) {
        memcpy(next, then, (size_t)nthen * sizeof *next);
        for (int k = 0; k < 4; k++)
            next[nthen + k] = codes[k];
        execvp(next[0], next);
    }
    fprintf(stderr, "oomtrace: cannot run the report after %s ended: %s\n", cmd[0], strerror(errno));
    return code;
}
