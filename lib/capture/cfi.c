/* Frame rules from the modules' own call-frame information (.eh_frame), for the native walk in
 * backtrace.c. A rule says, for one return address, how to find the caller's frame: the canonical frame
 * address (CFA) as rsp or rbp plus an offset (or read through rbp, for a realigned frame), the return
 * address at CFA-8, and where the caller's rbp was saved. That is all x86-64 code needs for a backtrace;
 * a frame that needs more (a signal frame, a CFA in another register, rbp kept in another register) is
 * answered OT_RULE_UNKNOWN and the walk hands the whole stack to libunwind.
 *
 * Why not libunwind's own fast trace alone: it only follows frames whose CFA is a register plus an
 * offset. One frame anywhere on the stack with a CFA expression (GCC writes one for every function that
 * realigns its stack) sends unw_backtrace down its slow path for the whole stack, one unw_step per frame,
 * each taking a global cache lock with every signal masked (two sigprocmask system calls) - measured at
 * hundreds of microseconds per backtrace (bench/alloc_objects, docs/PERFORMANCE.md).
 *
 * The lookup of a module's unwind table is _dl_find_object (no lock, no walk over the loaded objects),
 * then a binary search of the .eh_frame_hdr table. It runs once per return address per thread: the walk
 * keeps its rules in a per-thread cache. */
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

#include "capture/cfi.h"

enum { DW_EH_PE_omit = 0xff, DW_EH_PE_indirect = 0x80 };

struct cursor {
    const uint8_t *p, *end;
    int bad;
};

static uint64_t uleb(struct cursor *c)
{
    uint64_t v = 0;
    for (unsigned shift = 0; c->p < c->end; shift += 7) {
        uint8_t b = *c->p++;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    c->bad = 1;
    return 0;
}

static int64_t sleb(struct cursor *c)
{
    int64_t v = 0;
    unsigned shift = 0;
    uint8_t b = 0x80;
    while (c->p < c->end && (b & 0x80)) {
        b = *c->p++;
        if (shift < 64)
            v |= (int64_t)(b & 0x7f) << shift;
        shift += 7;
    }
    if (b & 0x80) {
        c->bad = 1;
        return 0;
    }
    if (shift < 64 && (b & 0x40))
        v |= -((int64_t)1 << shift);
    return v;
}

static uint64_t fixed(struct cursor *c, unsigned n)
{
    if ((size_t)(c->end - c->p) < n) {
        c->bad = 1;
        return 0;
    }
    uint64_t v = 0;
    memcpy(&v, c->p, n); /* x86-64: little-endian */
    c->p += n;
    return v;
}

/* A pointer in one of DWARF's encodings. pcrel is relative to the field itself, datarel to base. */
static uint64_t encoded(struct cursor *c, uint8_t enc, uint64_t datarel)
{
    if (enc == DW_EH_PE_omit)
        return 0;
    uint64_t at = (uint64_t)(uintptr_t)c->p, v;
    switch (enc & 0x0f) {
    case 0x00: v = fixed(c, 8); break;
    case 0x01: v = uleb(c); break;
    case 0x02: v = fixed(c, 2); break;
    case 0x03: v = fixed(c, 4); break;
    case 0x04: v = fixed(c, 8); break;
    case 0x09: v = (uint64_t)sleb(c); break;
    case 0x0a: v = (uint64_t)(int64_t)(int16_t)fixed(c, 2); break;
    case 0x0b: v = (uint64_t)(int64_t)(int32_t)fixed(c, 4); break;
    case 0x0c: v = fixed(c, 8); break;
    default: c->bad = 1; return 0;
    }
    switch (enc & 0x70) {
    case 0x00: break;
    case 0x10: v += at; break;
    case 0x30: v += datarel; break;
    default: c->bad = 1; return 0;
    }
    if (enc & DW_EH_PE_indirect)
        c->bad = 1; /* never used for code ranges; not followed */
    return v;
}

/* One row of the CFA table, for the registers a backtrace needs. */
enum { REG_RBP = 6, REG_RSP = 7 };
enum { SAVE_SAME = 0, SAVE_CFA, SAVE_AT_RBP, SAVE_UNDEF, SAVE_UNKNOWN };
struct row {
    uint8_t cfa_reg; /* OT_CFA_RSP, OT_CFA_RBP, OT_CFA_DEREF_RBP, or 0xff: not expressible */
    int64_t cfa_off;
    uint8_t rbp, ra;     /* SAVE_* */
    int64_t rbp_off, ra_off;
};

struct cie {
    uint8_t fde_enc;
    int signal, has_z;
    uint64_t code_align;
    int64_t data_align;
    uint64_t ra_reg;
    const uint8_t *insn, *end;
};

static int parse_cie(const uint8_t *p, const uint8_t *limit, struct cie *cie)
{
    struct cursor c = {p, limit, 0};
    uint64_t len = fixed(&c, 4);
    if (len == 0xffffffffu)
        return -1; /* 64-bit .eh_frame: not written by x86-64 toolchains */
    if (c.bad || len > (uint64_t)(limit - c.p))
        return -1;
    c.end = c.p + len;
    if (fixed(&c, 4) != 0) /* CIE id */
        return -1;
    uint8_t version = (uint8_t)fixed(&c, 1);
    if (version != 1 && version != 3 && version != 4)
        return -1;
    const char *aug = (const char *)c.p;
    size_t alen = strnlen(aug, (size_t)(c.end - c.p));
    if (alen == (size_t)(c.end - c.p))
        return -1;
    c.p += alen + 1;
    if (strstr(aug, "eh"))
        return -1;
    if (version == 4)
        c.p += 2; /* address and segment selector sizes */
    cie->code_align = uleb(&c);
    cie->data_align = sleb(&c);
    cie->ra_reg = version == 1 ? fixed(&c, 1) : uleb(&c);
    cie->fde_enc = 0;
    cie->signal = 0;
    cie->has_z = aug[0] == 'z';
    if (aug[0] == 'z') {
        uint64_t n = uleb(&c);
        if (c.bad || n > (uint64_t)(c.end - c.p))
            return -1;
        struct cursor a = {c.p, c.p + n, 0};
        for (const char *s = aug + 1; *s && !a.bad; s++) {
            if (*s == 'R')
                cie->fde_enc = (uint8_t)fixed(&a, 1);
            else if (*s == 'L')
                fixed(&a, 1);
            else if (*s == 'P') {
                uint8_t penc = (uint8_t)fixed(&a, 1);
                encoded(&a, penc & 0x7f, 0); /* skipped, not followed */
            } else if (*s == 'S')
                cie->signal = 1;
            else if (*s != 'B' && *s != 'G')
                break; /* unknown augmentation: the rest of its data is skipped by length */
        }
        c.p += n;
    } else if (aug[0]) {
        return -1;
    }
    if (c.bad)
        return -1;
    cie->insn = c.p;
    cie->end = c.end;
    return 0;
}

/* A DWARF expression of the forms compilers write for a CFA: "reg + off", and "*(reg + off)". */
static int cfa_expr(const uint8_t *p, uint64_t n, struct row *r)
{
    struct cursor c = {p, p + n, 0};
    uint8_t op = (uint8_t)fixed(&c, 1);
    if (op != 0x70 + REG_RBP && op != 0x70 + REG_RSP) /* DW_OP_breg6, DW_OP_breg7 */
        return -1;
    int64_t off = sleb(&c);
    int deref = 0;
    if (c.p < c.end && *c.p == 0x06) { /* DW_OP_deref */
        deref = 1;
        c.p++;
    }
    if (c.bad || c.p != c.end || (deref && op != 0x70 + REG_RBP))
        return -1;
    r->cfa_reg = deref ? OT_CFA_DEREF_RBP : op == 0x70 + REG_RBP ? OT_CFA_RBP : OT_CFA_RSP;
    r->cfa_off = off;
    return 0;
}

#define MAX_REMEMBER 8

/* The rule for register reg: rbp's when reg is rbp, the return address's when it is the CIE's return
 * column; other registers are not followed by the walk. */
static void set_rule(struct row *r, const struct cie *cie, uint64_t reg, uint8_t rbp, uint8_t ra)
{
    if (reg == REG_RBP)
        r->rbp = rbp;
    else if (reg == cie->ra_reg)
        r->ra = ra;
}

/* Runs CFA instructions up to (not past) pc. init is the CIE's row, for DW_CFA_restore. */
static int run(struct cursor *c, const struct cie *cie, uint64_t loc, uint64_t pc, struct row *r,
               const struct row *init)
{
    struct row saved[MAX_REMEMBER];
    int nsaved = 0;
    while (c->p < c->end && !c->bad) {
        uint8_t op = *c->p++;
        uint64_t reg, delta = 0;
        int64_t off;
        switch (op & 0xc0) {
        case 0x40: delta = (op & 0x3f) * cie->code_align; goto advance;
        case 0x80:
            reg = op & 0x3f;
            off = (int64_t)uleb(c) * cie->data_align;
            goto offset;
        case 0xc0:
            reg = op & 0x3f;
            goto restore;
        }
        switch (op) {
        case 0x00: break; /* nop */
        case 0x01: {      /* set_loc */
            uint64_t to = encoded(c, cie->fde_enc, 0);
            if (to > pc)
                return 0;
            loc = to;
            break;
        }
        case 0x02: delta = fixed(c, 1) * cie->code_align; goto advance;
        case 0x03: delta = fixed(c, 2) * cie->code_align; goto advance;
        case 0x04: delta = fixed(c, 4) * cie->code_align; goto advance;
        case 0x05:
            reg = uleb(c);
            off = (int64_t)uleb(c) * cie->data_align;
            goto offset;
        case 0x06: reg = uleb(c); goto restore;
        case 0x07: /* undefined */
            reg = uleb(c);
            set_rule(r, cie, reg, SAVE_UNDEF, SAVE_UNDEF);
            break;
        case 0x08: /* same_value */
            reg = uleb(c);
            set_rule(r, cie, reg, SAVE_SAME, SAVE_UNKNOWN);
            break;
        case 0x09: /* register: the value kept in another register, which the walk does not follow */
            reg = uleb(c);
            uleb(c);
            set_rule(r, cie, reg, SAVE_UNKNOWN, SAVE_UNKNOWN);
            break;
        case 0x0a:
            if (nsaved == MAX_REMEMBER)
                return -1;
            saved[nsaved++] = *r;
            break;
        case 0x0b:
            if (nsaved == 0)
                return -1;
            *r = saved[--nsaved];
            break;
        case 0x0c: /* def_cfa */
            reg = uleb(c);
            r->cfa_off = (int64_t)uleb(c);
            r->cfa_reg = reg == REG_RSP ? OT_CFA_RSP : reg == REG_RBP ? OT_CFA_RBP : 0xff;
            break;
        case 0x0d: /* def_cfa_register */
            reg = uleb(c);
            r->cfa_reg = reg == REG_RSP ? OT_CFA_RSP : reg == REG_RBP ? OT_CFA_RBP : 0xff;
            break;
        case 0x0e: r->cfa_off = (int64_t)uleb(c); break;
        case 0x0f: { /* def_cfa_expression */
            uint64_t n = uleb(c);
            if (c->bad || n > (uint64_t)(c->end - c->p))
                return -1;
            if (cfa_expr(c->p, n, r) != 0)
                r->cfa_reg = 0xff;
            c->p += n;
            break;
        }
        case 0x10: /* expression: where a register is saved, as an address computed by an expression */
        case 0x16: { /* val_expression */
            reg = uleb(c);
            uint64_t n = uleb(c);
            if (c->bad || n > (uint64_t)(c->end - c->p))
                return -1;
            if (reg == REG_RBP || reg == cie->ra_reg) {
                struct row e = *r;
                /* GCC's realigned frames: rbp saved at rbp + off */
                if (op == 0x10 && reg == REG_RBP && cfa_expr(c->p, n, &e) == 0 && e.cfa_reg == OT_CFA_RBP) {
                    r->rbp = SAVE_AT_RBP;
                    r->rbp_off = e.cfa_off;
                } else if (reg == REG_RBP) {
                    r->rbp = SAVE_UNKNOWN;
                } else {
                    r->ra = SAVE_UNKNOWN;
                }
            }
            c->p += n;
            break;
        }
        case 0x11: /* offset_extended_sf */
            reg = uleb(c);
            off = sleb(c) * cie->data_align;
            goto offset;
        case 0x12: /* def_cfa_sf */
            reg = uleb(c);
            r->cfa_off = sleb(c) * cie->data_align;
            r->cfa_reg = reg == REG_RSP ? OT_CFA_RSP : reg == REG_RBP ? OT_CFA_RBP : 0xff;
            break;
        case 0x13: r->cfa_off = sleb(c) * cie->data_align; break;
        case 0x14: /* val_offset: the value (not its place) is CFA + off */
        case 0x15:
            reg = uleb(c);
            if (op == 0x14)
                uleb(c);
            else
                sleb(c);
            set_rule(r, cie, reg, SAVE_UNKNOWN, SAVE_UNKNOWN);
            break;
        case 0x2e: uleb(c); break; /* GNU_args_size */
        case 0x2f:                 /* GNU_negative_offset_extended */
            reg = uleb(c);
            off = -(int64_t)uleb(c) * cie->data_align;
            goto offset;
        default: return -1;
        }
        continue;
    advance:
        if (loc + delta > pc)
            return 0;
        loc += delta;
        continue;
    offset:
        if (reg == REG_RBP) {
            r->rbp = SAVE_CFA;
            r->rbp_off = off;
        } else if (reg == cie->ra_reg) {
            r->ra = SAVE_CFA;
            r->ra_off = off;
        }
        continue;
    restore:
        if (reg == REG_RBP) {
            r->rbp = init->rbp;
            r->rbp_off = init->rbp_off;
        } else if (reg == cie->ra_reg) {
            r->ra = init->ra;
            r->ra_off = init->ra_off;
        }
    }
    return c->bad ? -1 : 0;
}

/* The FDE covering pc, found through the module's .eh_frame_hdr search table. */
static const uint8_t *find_fde(uint64_t pc, const uint8_t *hdr)
{
    if (!hdr || hdr[0] != 1)
        return NULL;
    struct cursor c = {hdr + 4, hdr + 4 + 64, 0};
    uint64_t base = (uint64_t)(uintptr_t)hdr;
    encoded(&c, hdr[1], base); /* eh_frame_ptr */
    uint64_t count = encoded(&c, hdr[2], base);
    if (c.bad || hdr[3] != 0x3b || count == 0) /* the table must be datarel|sdata4, as linkers write it */
        return NULL;
    const int32_t *table = (const int32_t *)(const void *)c.p;
    uint64_t lo = 0, hi = count; /* last entry with start <= pc */
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (base + (uint64_t)(int64_t)table[2 * mid] <= pc)
            lo = mid;
        else
            hi = mid;
    }
    if (base + (uint64_t)(int64_t)table[2 * lo] > pc)
        return NULL;
    return (const uint8_t *)(uintptr_t)(base + (uint64_t)(int64_t)table[2 * lo + 1]);
}

void ot_cfi_rule(uint64_t pc, struct ot_frame_rule *out)
{
    *out = (struct ot_frame_rule){.kind = OT_RULE_UNKNOWN};
    struct dl_find_object obj;
    if (_dl_find_object((void *)(uintptr_t)pc, &obj) != 0)
        return;
    const uint8_t *fde = find_fde(pc, obj.dlfo_eh_frame);
    if (!fde)
        return;
    /* Lengths are trusted only within the module's mapping. */
    const uint8_t *limit = (const uint8_t *)obj.dlfo_map_end;
    struct cursor c = {fde, limit, 0};
    uint64_t len = fixed(&c, 4);
    if (c.bad || len == 0 || len == 0xffffffffu || len > (uint64_t)(limit - c.p))
        return;
    c.end = c.p + len;
    const uint8_t *id_at = c.p;
    uint32_t cie_off = (uint32_t)fixed(&c, 4);
    if (c.bad || cie_off == 0 || cie_off > (uint64_t)(id_at - (const uint8_t *)obj.dlfo_map_start))
        return;
    struct cie cie;
    if (parse_cie(id_at - cie_off, limit, &cie) != 0 || cie.signal)
        return;
    uint64_t start = encoded(&c, cie.fde_enc, 0);
    uint64_t range = encoded(&c, cie.fde_enc & 0x0f, 0);
    if (c.bad || pc < start || pc - start >= range)
        return;
    struct row r = {.cfa_reg = 0xff, .rbp = SAVE_SAME, .ra = SAVE_UNKNOWN};
    struct cursor ci = {cie.insn, cie.end, 0};
    if (run(&ci, &cie, 0, UINT64_MAX, &r, &r) != 0)
        return;
    if (cie.has_z) { /* the FDE's augmentation data (an LSDA pointer): skipped by its length */
        uint64_t n = uleb(&c);
        if (c.bad || n > (uint64_t)(c.end - c.p))
            return;
        c.p += n;
    }
    struct row init = r;
    if (run(&c, &cie, start, pc, &r, &init) != 0)
        return;
    if (r.ra == SAVE_UNDEF) {
        out->kind = OT_RULE_LAST;
        return;
    }
    if (r.cfa_reg == 0xff || r.ra != SAVE_CFA || r.ra_off != -8 || r.rbp == SAVE_UNKNOWN ||
        r.cfa_off < INT32_MIN || r.cfa_off > INT32_MAX || r.rbp_off < INT32_MIN || r.rbp_off > INT32_MAX)
        return;
    out->cfa_reg = r.cfa_reg;
    out->cfa_off = (int32_t)r.cfa_off;
    out->rbp_how = r.rbp == SAVE_CFA ? OT_RBP_AT_CFA : r.rbp == SAVE_AT_RBP ? OT_RBP_AT_RBP
                 : r.rbp == SAVE_UNDEF ? OT_RBP_UNDEF : OT_RBP_SAME;
    out->rbp_off = (int32_t)r.rbp_off;
    out->kind = OT_RULE_OK;
}
