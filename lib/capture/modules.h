#ifndef OOMTRACE_MODULES_H
#define OOMTRACE_MODULES_H
#include "common/buf.h"
void ot_modules_serialize(struct ot_buf *out);
void ot_symbols_serialize(struct ot_buf *out, const uint64_t *addrs, uint64_t n);
#endif
