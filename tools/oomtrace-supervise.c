/* oomtrace-supervise: the launcher's process while the traced command runs (tools/oomtrace execs it).
 *
 *     oomtrace-supervise [--env NAME=VALUE]... --then N WORD... -- CMD [ARG]...
 *
 * Runs CMD as its child with the NAME=VALUE variables added (the child only: this process is never traced),
 * passes on to it the signals sent to this process, waits for it, then execs the N WORDs (the launcher's
 * report) with three more: CMD's status as a shell gives it (the exit code, or 128 + the signal), the
 * number of the signal that ended it (0 when it exited), and CMD's process id (whose snapshots are CMD's own).
 *
 * Why a program and not the shell: the launcher's process id is the one a supervisor, a job script's
 * `kill PID` or a CI runner's cancel signals. A shell waiting for a foreground command runs its traps only
 * once the command is over, so a SIGTERM stopped the launcher and left the command running, orphaned; and
 * a shell's background command ignores SIGINT and SIGQUIT and reads /dev/null, which the command would see.
 * Here the process id stays the launcher's across both execs, and CMD gets the signal dispositions, mask
 * and standard input the launcher had, as it would untraced.
 *
 * A signal is passed on only when a process sent it (kill, sigqueue). One the terminal sends (Ctrl-C, a
 * hangup) goes to the whole foreground process group, CMD included: passing it on would deliver it twice.
 * A signal that was ignored when the launcher started stays ignored, for CMD too.
 *
 * A SIGKILL cannot be caught and passed on: CMD is made to get SIGTERM when this process dies
 * (PR_SET_PDEATHSIG, kept across CMD's exec, not inherited by CMD's own children), so a launcher killed
 * outright does not leave CMD running orphaned. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

static const int passed_on[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2};
static const char *const passed_name[] = {"SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2"};
#define NPASSED (sizeof passed_on / sizeof passed_on[0])

static struct sigaction original[NPASSED];
static int installed[NPASSED];
static volatile sig_atomic_t child; /* 0 once reaped: a pid that may be reused is never signalled */
static char said[NPASSED][320];     /* the line said on passing each signal on, composed before any arrives */

static void pass_on(int sig, siginfo_t *info, void *uctx)
{
    (void)uctx;
    if (info->si_code > 0) /* sent by the kernel (the terminal): CMD has it already */
        return;
    int saved = errno;
    pid_t pid = child;
    if (pid > 0 && kill(pid, sig) == 0) {
        for (size_t i = 0; i < NPASSED; i++)
            if (passed_on[i] == sig && write(2, said[i], strlen(said[i])) < 0)
                break;
    }
    errno = saved;
}

static int usage(const char *why)
{
    fprintf(stderr, "oomtrace-supervise: %s (it is run by the oomtrace launcher, not by hand)\n", why);
    return 2;
}

int main(int argc, char **argv)
{
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

    /* The handlers are in place before the fork, with the signals blocked until CMD's pid is known: one
     * that arrives in between is passed on then, never lost and never fatal to the launcher alone. */
    sigset_t block, mask;
    sigemptyset(&block);
    for (size_t k = 0; k < NPASSED; k++)
        sigaddset(&block, passed_on[k]);
    sigprocmask(SIG_BLOCK, &block, &mask);
    for (size_t k = 0; k < NPASSED; k++) {
        sigaction(passed_on[k], NULL, &original[k]);
        if (original[k].sa_handler == SIG_IGN)
            continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = pass_on;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigfillset(&sa.sa_mask);
        installed[k] = sigaction(passed_on[k], &sa, NULL) == 0;
        int n = snprintf(said[k], sizeof said[k], "oomtrace: %s passed on to %s; its report follows when it ends\n",
                         passed_name[k], cmd[0]);
        if (n >= (int)sizeof said[k]) /* a long command path: the line still ends */
            said[k][sizeof said[k] - 2] = '\n';
    }

    fflush(NULL);
    pid_t self = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "oomtrace: cannot start %s: %s\n", cmd[0], strerror(errno));
        return 2;
    }
    if (pid == 0) {
        for (size_t k = 0; k < NPASSED; k++)
            if (installed[k])
                sigaction(passed_on[k], &original[k], NULL);
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
    child = pid;
    /* The line said on passing a signal on goes to the launcher's standard error, which may be a pipe whose
     * reader has gone (CMD 2>&1 | head -1): it must not end the launcher by SIGPIPE before CMD's status is
     * known. Ignored here only, CMD having started with the launcher's dispositions; the report gets them back. */
    struct sigaction pipe_ign, pipe_old;
    memset(&pipe_ign, 0, sizeof pipe_ign);
    pipe_ign.sa_handler = SIG_IGN;
    int pipe_set = sigaction(SIGPIPE, &pipe_ign, &pipe_old) == 0;
    sigprocmask(SIG_SETMASK, &mask, NULL);

    int status = 0;
    pid_t got;
    do
        got = waitpid(pid, &status, 0);
    while (got < 0 && errno == EINTR);
    sigprocmask(SIG_BLOCK, &block, NULL);
    child = 0;
    int code = 1, sig = 0;
    if (got == pid && WIFEXITED(status))
        code = WEXITSTATUS(status);
    else if (got == pid && WIFSIGNALED(status)) {
        sig = WTERMSIG(status);
        code = 128 + sig;
    }

    /* The report runs with the launcher's own dispositions and mask again. */
    for (size_t k = 0; k < NPASSED; k++)
        if (installed[k])
            sigaction(passed_on[k], &original[k], NULL);
    if (pipe_set)
        sigaction(SIGPIPE, &pipe_old, NULL);
    sigprocmask(SIG_SETMASK, &mask, NULL);
    char codes[3][16];
    snprintf(codes[0], sizeof codes[0], "%d", code);
    snprintf(codes[1], sizeof codes[1], "%d", sig);
    snprintf(codes[2], sizeof codes[2], "%d", (int)pid);
    char **next = calloc((size_t)nthen + 4, sizeof *next);
    if (next) {
        memcpy(next, then, (size_t)nthen * sizeof *next);
        next[nthen] = codes[0];
        next[nthen + 1] = codes[1];
        next[nthen + 2] = codes[2];
        execvp(next[0], next);
    }
    fprintf(stderr, "oomtrace: cannot run the report after %s ended: %s\n", cmd[0], strerror(errno));
    return code;
}
