/* Door 1: a program linked with -lcuda calls the exact driver names; the preload's exports win. */
#include "scenario.h"

int main(void)
{
    int rc = make_context(cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent);
    return rc ? rc : run_scenario(cuMemAlloc_v2, cuMemFree_v2);
}
