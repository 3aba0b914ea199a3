/* A CUDA runtime program (cudaMalloc/cudaFree, static libcudart): what a user's own nvcc build looks like.
 * On the stand-in driver it must fail cleanly (the stand-in refuses cudart), never crash; on a GPU it
 * allocates and frees 1 MiB. Exit status: 0 allocated, 3 the runtime refused. */
#include <cuda_runtime.h>
#include <stdio.h>

int main(void)
{
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, 1 << 20);
    printf("cudaMalloc: %s\n", cudaGetErrorString(e));
    if (e != cudaSuccess)
        return 3;
    cudaFree(p);
    return 0;
}
