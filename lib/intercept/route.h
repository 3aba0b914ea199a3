#ifndef OOMTRACE_INTERCEPT_ROUTE_H
#define OOMTRACE_INTERCEPT_ROUTE_H
/* The wrapper for a real driver function found by the program (dlsym on a handle, cuGetProcAddress),
 * or real_fn itself when it is not one we wrap (route.c). */
void *ot_route(void *real_fn);
#endif
