/* A workload that is killed by the crash tests (tests/e2e/test_crash.c). Linked with -lcuda.
 * It allocates 4096*(i+1) bytes for i = 0, 1, 2, ... every 2 ms, frees allocation i-1 whenever i % 4 == 3,
 * and reports each event on stdout as "a I T_NS" or "f I T_NS" (CLOCK_MONOTONIC, after the call
 * returned), so the test knows exactly what was live at any moment.
 *   crash_workload run       until killed
 *   crash_workload segv N    dies of SIGSEGV after N allocations
 *   crash_workload exit N    exits 0 after N allocations */
#include <cuda.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

static void report(char kind, long i)
{
    char line[64];
    int n = snprintf(line, sizeof line, "%c %ld %llu\n", kind, i, now_ns());
    if (write(1, line, (size_t)n) != n)
        _exit(3);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "run";
    long limit = argc > 2 ? atol(argv[2]) : -1;
    CUcontext ctx;
    if (cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx))
        return 2;
    static CUdeviceptr ptr[1 << 16];
    struct timespec two_ms = {0, 2 * 1000 * 1000};
    for (long i = 0; i < (1 << 16); i++) {
        if (limit >= 0 && i == limit) {
            if (strcmp(mode, "segv") == 0)
                raise(SIGSEGV);
            return 0;
        }
        if (cuMemAlloc_v2(&ptr[i], 4096 * (size_t)(i + 1)) != CUDA_SUCCESS)
            return 4;
        report('a', i);
        if (i % 4 == 3) {
            if (cuMemFree_v2(ptr[i - 1]) != CUDA_SUCCESS)
                return 5;
            report('f', i - 1);
        }
        nanosleep(&two_ms, NULL);
    }
    return 0;
}
