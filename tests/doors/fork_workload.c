/* fork and exec under the tracer (tests/e2e/test_procs.c). Linked with -lcuda.
 *   fork_workload cuda     parent holds 256 MiB, forks; the child makes its own context, allocates 128 MiB
 *                          and runs out of memory on a 2 GiB request; then the parent does the same with
 *                          1 GiB. Each process must write its own snapshot with only its own memory.
 *   fork_workload nocuda   the child never touches CUDA (a DataLoader worker) and exits 7
 *   fork_workload exec     the child execs build/tests/door_linked, which traces itself
 * A thread allocates in a loop throughout, so fork() happens while the tracer is busy. Before the forks the
 * parent reports a frameworks' view (JAX's, as the companion would): the parent's snapshot carries it, the
 * child's must not (what the parent's allocators held is not the child's). */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define MiB (1024ull * 1024)

static volatile int stop;
static CUcontext ctx;

static void *busy(void *arg)
{
    (void)arg;
    cuCtxSetCurrent(ctx);
    while (!stop) {
        CUdeviceptr p;
        if (cuMemAlloc_v2(&p, 4096) == CUDA_SUCCESS)
            cuMemFree_v2(p);
    }
    return NULL;
}

static int context(void)
{
    return cuInit(0) || cuDevicePrimaryCtxRetain(&ctx, 0) || cuCtxSetCurrent(ctx);
}

/* The smallest view the reader takes: one INFO record (jax, version 0, reason api, taken at 1 ns, collected
 * in 0) - docs/FORMAT.md, FRAMEWORK. */
static void report_view(void)
{
    static const unsigned char payload[] = {1, 1, 1, 12, 3, 'j', 'a', 'x', 1, '0', 3, 'a', 'p', 'i', 1, 0};
    int (*state)(const void *, size_t) = (int (*)(const void *, size_t))dlsym(RTLD_DEFAULT, "oomtrace_framework_state");
    if (state)
        state(payload, sizeof payload);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "cuda";
    if (context())
        return 2;
    CUdeviceptr held, p;
    if (cuMemAlloc_v2(&held, 256 * MiB) != CUDA_SUCCESS)
        return 3;
    report_view();
    pthread_t t;
    pthread_create(&t, NULL, busy, NULL);
    for (int i = 0; i < 20; i++) {
        /* Fork repeatedly while the other thread is inside the tracer: no lock may be inherited held. */
        pid_t c = fork();
        if (c == 0) {
            if (strcmp(mode, "nocuda") == 0)
                _exit(7);
            if (strcmp(mode, "exec") == 0) {
                execl("build/tests/door_linked", "door_linked", (char *)NULL);
                _exit(127);
            }
            if (i < 19)
                _exit(0);
            if (context() || cuMemAlloc_v2(&p, 128 * MiB) != CUDA_SUCCESS)
                _exit(4);
            _exit(cuMemAlloc_v2(&p, 2048 * MiB) == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 5);
        }
        int st;
        waitpid(c, &st, 0);
        int want = strcmp(mode, "nocuda") == 0 ? 7 : 0;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != want) {
            fprintf(stderr, "child %d ended with status 0x%x\n", i, st);
            return 6;
        }
        if (strcmp(mode, "exec") == 0)
            break;
    }
    stop = 1;
    pthread_join(t, NULL);
    return cuMemAlloc_v2(&p, 1024 * MiB) == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 8;
}
