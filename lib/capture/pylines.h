#ifndef OOMTRACE_PYLINES_H
#define OOMTRACE_PYLINES_H
#include <stddef.h>
#include <stdint.h>

/* The line of instruction index lasti (firstline: the code object's first line); -1 when the table has
 * none. 3.11+: co_linetable location entries; 3.10: co_linetable (start, line delta) pairs; 3.9:
 * co_lnotab. */
int ot_py_line_311(const uint8_t *t, size_t n, int firstline, uint64_t lasti);
int ot_py_line_310(const uint8_t *t, size_t n, int firstline, uint64_t lasti);
int ot_py_line_39(const uint8_t *t, size_t n, int firstline, uint64_t lasti);
#endif
