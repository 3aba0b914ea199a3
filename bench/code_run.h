/* Straight-line code that the step's own work stands for between two allocations: run through, it evicts
 * the tracer's code from the instruction cache (L1i is 32 KB), as a training step's dispatcher and
 * kernels do. Each statement is ~10 bytes of code; a function of OT_CODE_RUN(k) is ~40 KB. */
#ifndef OOMTRACE_BENCH_CODE_RUN_H
#define OOMTRACE_BENCH_CODE_RUN_H
#define CR1(s, k) (s) += (k);
#define CR8(s, k) CR1(s, k) CR1(s, k + 1) CR1(s, k + 2) CR1(s, k + 3) CR1(s, k + 4) CR1(s, k + 5) CR1(s, k + 6) CR1(s, k + 7)
#define CR64(s, k) CR8(s, k) CR8(s, k + 8) CR8(s, k + 16) CR8(s, k + 24) CR8(s, k + 32) CR8(s, k + 40) CR8(s, k + 48) CR8(s, k + 56)
#define CR512(s, k) CR64(s, k) CR64(s, k + 64) CR64(s, k + 128) CR64(s, k + 192) CR64(s, k + 256) CR64(s, k + 320) \
    CR64(s, k + 384) CR64(s, k + 448)
#define OT_CODE_RUN(s, k) CR512(s, k) CR512(s, k + 512) CR512(s, k + 1024) CR512(s, k + 1536) CR512(s, k + 2048) \
    CR512(s, k + 2560) CR512(s, k + 3072) CR512(s, k + 3584)
#endif
