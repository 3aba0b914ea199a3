/* What a checked read costs (issue 16's eighth pass): process_vm_readv of N buffers of 72 bytes (a frame's
 * fields), a page apart, in one call against N calls of one buffer each, on this process. The borrow's
 * check of a lender's chain (lib/capture/pyborrow.c) chooses between buffers and calls by these figures.
 *
 *     build/bench/vm_reads [N...]       # default 1 3 10 30; prints ns per call of N buffers, each way */
#include <stdio.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define MAXN 256
#define REPS 2000

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

static void one(int n)
{
    static char src[MAXN * 4096], dst[MAXN * 72];
    struct iovec l[MAXN], r[MAXN];
    for (int i = 0; i < n; i++) {
        src[i * 4096] = (char)i; /* each page mapped */
        l[i] = (struct iovec){dst + i * 72, 72};
        r[i] = (struct iovec){src + i * 4096, 72};
    }
    const pid_t pid = getpid();
    long bad = 0;
    double a = now_ns();
    for (int k = 0; k < REPS; k++)
        bad += process_vm_readv(pid, l, (unsigned long)n, r, (unsigned long)n, 0) != 72 * n;
    double b = now_ns();
    for (int k = 0; k < REPS; k++)
        for (int i = 0; i < n; i++)
            bad += process_vm_readv(pid, l + i, 1, r + i, 1, 0) != 72;
    double c = now_ns();
    if (bad)
        fprintf(stderr, "vm_reads: %ld reads failed\n", bad);
    printf("buffers=%d one_call_ns=%.0f calls_ns=%.0f\n", n, (b - a) / REPS, (c - b) / REPS);
}

int main(int argc, char **argv)
{
    static const int def[] = {1, 3, 10, 30};
    if (argc < 2)
        for (size_t i = 0; i < sizeof def / sizeof def[0]; i++)
            one(def[i]);
    for (int i = 1; i < argc; i++) {
        int n = atoi(argv[i]);
        if (n >= 1 && n <= MAXN)
            one(n);
    }
    return 0;
}
