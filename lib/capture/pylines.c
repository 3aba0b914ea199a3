/* CPython's line tables, read back: the line of an instruction from a code object's table, in each
 * version's format. Pure functions of the table's bytes (pyframes.c copies them out of the process). */
#include <stddef.h>
#include <stdint.h>

#include "capture/pylines.h"

/* The line of instruction index lasti, from a 3.11+ location table (CPython's Objects/locations.md:
 * entries of a start byte 1CCCCLLL (code, length-1) and 6-bit varints). -1 when it has none. */
int ot_py_line_311(const uint8_t *t, size_t n, int firstline, uint64_t lasti)
{
    int line = firstline;
    uint64_t addr = 0;
    size_t i = 0;
#define VARINT(out)                                                                                    \
    do {                                                                                               \
        unsigned shift_ = 0;                                                                           \
        uint64_t v_ = 0;                                                                               \
        uint8_t b_;                                                                                    \
        do {                                                                                           \
            if (i >= n)                                                                                \
                return -1;                                                                             \
            b_ = t[i++];                                                                               \
            v_ |= (uint64_t)(b_ & 63) << shift_;                                                       \
            shift_ += 6;                                                                               \
        } while ((b_ & 64) && shift_ < 64);                                                            \
        out = v_;                                                                                      \
    } while (0)
    while (i < n) {
        uint8_t first = t[i++];
        if (!(first & 0x80))
            return -1;
        unsigned code = (first >> 3) & 15, length = (first & 7) + 1;
        int this_line = line;
        uint64_t v;
        if (code == 15) {
            this_line = -1;
        } else if (code == 14) {
            VARINT(v);
            line += (v & 1) ? -(int)(v >> 1) : (int)(v >> 1);
            this_line = line;
            VARINT(v);
            VARINT(v);
            VARINT(v);
        } else if (code == 13) {
            VARINT(v);
            line += (v & 1) ? -(int)(v >> 1) : (int)(v >> 1);
            this_line = line;
        } else if (code >= 10) {
            line += (int)code - 10;
            this_line = line;
            i += 2;
        } else {
            this_line = line;
            i += 1;
        }
        if (lasti >= addr && lasti < addr + length)
            return this_line;
        addr += length;
    }
#undef VARINT
    return -1;
}

/* 3.10 (PEP 626): pairs of (byte-offset delta, signed line delta); -128 means no line. */
int ot_py_line_310(const uint8_t *t, size_t n, int firstline, uint64_t lasti)
{
    uint64_t byte = lasti * 2, end = 0;
    int line = firstline;
    for (size_t i = 0; i + 1 < n; i += 2) {
        uint64_t start = end;
        end += t[i];
        int delta = (int8_t)t[i + 1];
        int cur = delta == -128 ? -1 : (line += delta);
        if (byte >= start && byte < end)
            return cur;
    }
    return -1;
}

/* 3.9 co_lnotab: pairs of (byte-offset increment, signed line increment). */
int ot_py_line_39(const uint8_t *t, size_t n, int firstline, uint64_t lasti)
{
    uint64_t byte = lasti * 2, addr = 0;
    int line = firstline;
    for (size_t i = 0; i + 1 < n; i += 2) {
        addr += t[i];
        if (addr > byte)
            break;
        line += (int8_t)t[i + 1];
    }
    return line;
}
