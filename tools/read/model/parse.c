/* Snapshot parser: file bytes -> struct ot_snapshot. See snapshot.h for the contract and
 * docs/FORMAT.md for the bytes. */
#include "model/snapshot.h"

#include <inttypes.h>
#include <stdlib.h>

_Static_assert(sizeof(struct ot_file_header) == OT_FILE_HEADER_SIZE, "file header is 32 bytes");
_Static_assert(sizeof(struct ot_section_header) == OT_SECTION_HEADER_SIZE, "section header is 24 bytes");

#include "model/fw_when.h"
#include "model/section.h"
#include "model/zstd.h"

typedef int (*ot_section_parser)(struct sec_ctx *);

static const ot_section_parser section_parsers[] = {
    [OT_SEC_META] = parse_meta,         [OT_SEC_DEVICES] = parse_devices,   [OT_SEC_FAILURE] = parse_failure,
    [OT_SEC_MODULES] = parse_modules,   [OT_SEC_SYMBOLS] = parse_symbols,   [OT_SEC_PYFRAMES] = parse_pyframes,
    [OT_SEC_STACKS] = parse_stacks,     [OT_SEC_LIVE] = parse_live,         [OT_SEC_PEAK] = parse_peak,
    [OT_SEC_EVENTS] = parse_events,     [OT_SEC_MARKERS] = parse_markers,   [OT_SEC_POOLS] = parse_pools,
    [OT_SEC_MAPPINGS] = parse_mappings, [OT_SEC_PROCESSES] = parse_processes, [OT_SEC_THREADS] = parse_threads,
    [OT_SEC_LIVE_SEQ] = parse_live_seq, [OT_SEC_PEAK_REF] = parse_peak_ref,
    [OT_SEC_FRAMEWORK] = parse_framework, [OT_SEC_PROBES] = parse_probes, [OT_SEC_BORROWED] = parse_borrowed,
    [OT_SEC_CTX_FREED] = parse_ctx_freed,
};
#define OT_NPARSERS (sizeof(section_parsers) / sizeof(section_parsers[0]))

/* ---- file ---- */

static uint16_t le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t le64(const uint8_t *p)
{
    return (uint64_t)le32(p) | (uint64_t)le32(p + 4) << 32;
}

/* The Python companion runs inside the program, so a stack taken from its hooks (a framework's OOM seen
 * by on_raise) starts with the companion's own frames. They are the tracer's, not the program's: every
 * view leaves them out, and the stack keeps their count for the full views (FORMAT.md, STACKS). */
static bool tracer_word(const struct ot_snapshot *s, uint64_t w)
{
    if (!(w & OT_FRAME_PYTHON))
        return false;
    const struct ot_pyframe *pf = ot_snapshot_pyframe(s, w >> 1);
    return pf && ot_str_starts(pf->file, OT_TRACER_PYFILE_PREFIX);
}

static int hide_tracer_frames(struct ot_snapshot *s, char errbuf[OT_ERRBUF])
{
    /* Most snapshots have no companion frame at all: one pass over the Python frames says so, instead of a
     * lookup for every Python frame of every stack (100k stacks: ~0.1 s). */
    bool any = false;
    for (size_t i = 0; i < s->npyframes && !any; i++)
        any = ot_str_starts(s->pyframes[i].file, OT_TRACER_PYFILE_PREFIX);
    if (!any)
        return 0;
    for (size_t i = 0; i < s->nstacks; i++) {
        struct ot_stack *st = &s->stacks[i];
        size_t n = 0;
        for (size_t k = 0; k < st->nframes; k++)
            n += tracer_word(s, st->frames[k]);
        if (!n)
            continue;
        uint64_t *kept = st->nframes > n ? ot_arena_array(&s->arena, st->nframes - n, sizeof(uint64_t)) : NULL;
        if (st->nframes > n && !kept) {
            snprintf(errbuf, OT_ERRBUF, "out of memory (the snapshot's model is over its memory budget)");
            return -1;
        }
        size_t o = 0;
        for (size_t k = 0; k < st->nframes; k++)
            if (!tracer_word(s, st->frames[k]))
                kept[o++] = st->frames[k];
        st->frames = kept;
        st->nframes = o;
        st->tracer_frames = n;
    }
    return 0;
}

static int parse_section(struct ot_snapshot *s, const uint8_t *hdr, const uint8_t *payload, uint64_t off,
                         struct ot_zbuf *z, char *errbuf)
{
    struct sec_ctx x = {.snap = s, .type = le32(hdr), .hdr_off = off, .err = errbuf};
    uint32_t flags = le32(hdr + 4);
    uint64_t stored_len = le64(hdr + 8), raw_len = le64(hdr + 16);

    if (flags & ~OT_SECTION_ZSTD)
        return sec_err(&x, "unknown section flags 0x%x", flags);
    if (x.type != OT_SEC_PEAK && x.type != OT_SEC_PEAK_REF && x.type < 32 && (s->seen & (1u << x.type)))
        return sec_err(&x, "appears twice; the format allows one");
    size_t plen;
    if (flags & OT_SECTION_ZSTD) {
        struct ot_arena *a = &s->arena;
        /* Refused before a byte is decompressed: the claim alone is over the budget. */
        if (raw_len > a->limit - a->total)
            return sec_over_budget(&x, "a part that decompresses to %" PRIu64 " bytes", raw_len);
        char why[160];
        if (ot_zstd_decode(z, payload, (size_t)stored_len, raw_len, why, sizeof(why)) < 0)
            return sec_err(&x, "%s", why);
        /* The decompressed payload becomes part of the model: strings point into it. */
        uint8_t *owned = z->p;
        if (ot_arena_adopt(&s->arena, owned) < 0)
            return sec_err(&x, "out of memory");
        z->p = NULL;
        z->cap = 0;
        a->total += (size_t)raw_len;
        payload = owned;
        plen = (size_t)raw_len;
        x.compressed = true;
    } else {
        if (raw_len != stored_len)
            return sec_err(&x, "raw_len %" PRIu64 " differs from stored_len %" PRIu64 " in an uncompressed section",
                        raw_len, stored_len);
        plen = (size_t)stored_len;
    }
    x.payload = payload;
    x.c = (struct ot_cursor){payload, payload + plen, 0};
    s->seen |= 1u << x.type;
    /* Bytes after the fields this reader knows are a later minor version's additions: ignored. */
    return section_parsers[x.type](&x);
}

static size_t budget_set;

void ot_read_budget_set(size_t bytes)
{
    budget_set = bytes;
}

size_t ot_read_budget_given(void)
{
    return budget_set;
}

const char *ot_read_budget_why(void)
{
    static char why[96];
    if (budget_set)
        return "(--max-memory)";
    snprintf(why, sizeof(why), "(%u x the file's size + %u MiB; --max-memory SIZE raises it)", OT_READ_RATIO,
             OT_READ_BASE_MIB);
    return why;
}

size_t ot_read_budget(size_t file_len)
{
    if (budget_set)
        return budget_set;
    const uint64_t cap = (uint64_t)OT_READ_CAP_GIB << 30, base = (uint64_t)OT_READ_BASE_MIB << 20;
    uint64_t b = (uint64_t)file_len > (cap - base) / OT_READ_RATIO ? cap : OT_READ_RATIO * (uint64_t)file_len + base;
    return b > SIZE_MAX ? SIZE_MAX : (size_t)b;
}

/* The user's words first (the file is cut short: an interrupted copy, a full disk, a killed writer), the
 * format's detail after, for whoever debugs the writer. */
static void truncated(char errbuf[OT_ERRBUF], size_t len, uint64_t need, const char *where, const char *detail)
{
    snprintf(errbuf, OT_ERRBUF,
             "the snapshot is truncated: it ends at byte %zu of at least %" PRIu64
             ", inside %s: a copy cut short, or a full disk? (%s)", len, need, where, detail);
}

void ot_not_a_snapshot(const uint8_t *head, size_t n, char errbuf[OT_ERRBUF])
{
    /* The reports oomtrace-read writes, then what else users hand a tool that reads "a file from the run". */
    static const struct {
        const char *start;
        size_t len;
        const char *what;
    } known[] = {
        {"oomtrace", 8, "an oomtrace-read text report"},
        {"## oomtr", 8, "an oomtrace-read markdown report"},
        {"<!DOCTYP", 8, "an HTML page (oomtrace-read --format html writes one)"},
        {"<html", 5, "an HTML page (oomtrace-read --format html writes one)"},
        {"{", 1, "a JSON document (oomtrace-read --format json writes one)"},
        {"\x80", 1, "a Python pickle (oomtrace-read --format memviz writes one)"},
        {"PK\x03\x04", 4, "a zip archive (a torch.save checkpoint is one)"},
        {"\x7f" "ELF", 4, "an ELF file (a program, a library or a core dump)"},
        {"\x1f\x8b", 2, "a gzip file (decompress it first)"},
        {"\x28\xb5\x2f\xfd", 4, "a zstd file (decompress it first)"},
    };
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (n >= known[i].len && memcmp(head, known[i].start, known[i].len) == 0) {
            snprintf(errbuf, OT_ERRBUF,
                     "not an oomtrace snapshot but, by its first bytes, %s: give the .oomt snapshot (oomtrace-*.oomt in the run's "
                     "directory)", known[i].what);
            return;
        }
    snprintf(errbuf, OT_ERRBUF, "not an oomtrace snapshot (its first bytes are not a snapshot's)");
}

uint32_t ot_part_type(const uint8_t hdr[OT_SECTION_HEADER_SIZE])
{
    return le32(hdr);
}

uint64_t ot_part_stored(const uint8_t hdr[OT_SECTION_HEADER_SIZE])
{
    return le64(hdr + 8);
}

bool ot_part_known(uint32_t type)
{
    return type < OT_NPARSERS && section_parsers[type];
}

int ot_part_refused(const uint8_t hdr[OT_SECTION_HEADER_SIZE], uint64_t off, uint64_t len, size_t unknown_before,
                    char errbuf[OT_ERRBUF])
{
    uint32_t type = le32(hdr);
    if (type == 0) {
        static const uint8_t zeros[OT_SECTION_HEADER_SIZE];
        if (memcmp(hdr, zeros, sizeof(zeros)) == 0)
            snprintf(errbuf, OT_ERRBUF,
                     "the file holds zeros from byte %" PRIu64 " (of %" PRIu64 "), where its next part should start: "
                     "zero-filled after its last whole part, by a crash before the writer finished or by a copy?",
                     off, len);
        else
            snprintf(errbuf, OT_ERRBUF, "the snapshot is damaged: the part at byte %" PRIu64 " is of kind 0, "
                     "which no writer writes", off);
        return -1;
    }
    if (!ot_part_known(type) && unknown_before >= OT_MAX_UNKNOWN_PARTS) {
        snprintf(errbuf, OT_ERRBUF, "more than %d parts of kinds this reader does not know (the next at byte %" PRIu64
                 "): a damaged file, or one from a far later version of oomtrace", OT_MAX_UNKNOWN_PARTS, off);
        return -1;
    }
    return 0;
}

int ot_snapshot_parse(const uint8_t *buf, size_t len, struct ot_snapshot *snap, char errbuf[OT_ERRBUF])
{
    memset(snap, 0, sizeof(*snap));
    errbuf[0] = 0;
    snap->arena.limit = ot_read_budget(len);
    /* A short file is a cut snapshot only when what is there starts as one does. */
    if (len == 0) {
        snprintf(errbuf, OT_ERRBUF, "the file is empty (a snapshot starts with a 32-byte header)");
        return -1;
    }
    if (len < OT_FILE_HEADER_SIZE && memcmp(buf, OT_MAGIC, len < 8 ? len : 8) == 0) {
        truncated(errbuf, len, OT_FILE_HEADER_SIZE, "its file header", "the header takes 32 bytes");
        return -1;
    }
    if (len < OT_FILE_HEADER_SIZE || memcmp(buf, OT_MAGIC, 8) != 0) {
        ot_not_a_snapshot(buf, len, errbuf);
        return -1;
    }
    snap->version_major = le16(buf + 8);
    snap->version_minor = le16(buf + 10);
    snap->file_flags = le32(buf + 12);
    if (snap->version_major != OT_VERSION_MAJOR) {
        snprintf(errbuf, OT_ERRBUF, "unsupported format version %u.%u (this reader reads %u.x)",
                 snap->version_major, snap->version_minor, OT_VERSION_MAJOR);
        return -1;
    }

    struct ot_zbuf z = {0};
    uint64_t off = OT_FILE_HEADER_SIZE;
    int rc = 0;
    while (off < len) {
        /* Two files joined (cat A B > C): the second's magic where a part would start. */
        if (len - off >= 8 && memcmp(buf + off, OT_MAGIC, 8) == 0) {
            snprintf(errbuf, OT_ERRBUF,
                     "a second snapshot starts at byte %" PRIu64 ", after this one's last part (two files joined, "
                     "as by cat A B?): read each file on its own", off);
            rc = -1;
            break;
        }
        /* A tail whose first bytes name no part this reader knows, too short for a part or claiming more than
         * the file holds: bytes appended to a whole snapshot (echo >> S) read the same as one cut short inside
         * a part of a later version. A known part's start cut short is said as truncated, below. */
        uint32_t t = len - off >= 4 ? le32(buf + off) : 0;
        if (snap->nsections && len - off >= 4 && (t >= OT_NPARSERS || !section_parsers[t]) &&
            (len - off < OT_SECTION_HEADER_SIZE || le64(buf + off + 8) > len - off - OT_SECTION_HEADER_SIZE)) {
            snprintf(errbuf, OT_ERRBUF,
                     "the file ends with %" PRIu64 " bytes after its last whole part (from byte %" PRIu64
                     ") that are no part this reader knows: data appended to the snapshot, or a copy cut short?",
                     (uint64_t)len - off, off);
            rc = -1;
            break;
        }
        if (len - off < OT_SECTION_HEADER_SIZE) {
            char detail[96];
            snprintf(detail, sizeof(detail), "a section header at offset %" PRIu64 " has %" PRIu64 " of its 24 bytes",
                     off, (uint64_t)len - off);
            truncated(errbuf, len, off + OT_SECTION_HEADER_SIZE, "the header of its next part", detail);
            rc = -1;
            break;
        }
        const uint8_t *hdr = buf + off;
        if (ot_part_refused(hdr, off, len, snap->nunknown_sections, errbuf) < 0) {
            rc = -1;
            break;
        }
        uint32_t type = le32(hdr);
        uint64_t stored_len = le64(hdr + 8), raw_len = le64(hdr + 16);
        uint64_t payload_off = off + OT_SECTION_HEADER_SIZE;
        if (stored_len > len - payload_off) {
            char detail[160];
            snprintf(detail, sizeof(detail), "that part, from byte %" PRIu64 ", holds %" PRIu64 " of its %" PRIu64 " bytes",
                     off, (uint64_t)len - payload_off, stored_len);
            truncated(errbuf, len, payload_off + stored_len, ot_part_words(type), detail);
            rc = -1;
            break;
        }
        if (raw_len > OT_MAX_SECTION_RAW) {
            snprintf(errbuf, OT_ERRBUF, "the snapshot is damaged in %s, the part at byte %" PRIu64 ": it claims %" PRIu64
                     " bytes decompressed, over the 4 GiB limit", ot_part_words(type), off, raw_len);
            rc = -1;
            break;
        }
        snap->nsections++;
        if (type >= OT_NPARSERS || !section_parsers[type]) {
            snap->nunknown_sections++;
        } else if (parse_section(snap, hdr, buf + payload_off, off, &z, errbuf) < 0) {
            rc = -1;
            break;
        }
        off = payload_off + stored_len;
    }
    ot_zbuf_free(&z);
    if (rc == 0 && sec_resolve_peak_refs(snap, errbuf) < 0)
        rc = -1;
    if (rc == 0 && sec_resolve_borrowed(snap, errbuf) < 0)
        rc = -1;
    if (rc == 0 && hide_tracer_frames(snap, errbuf) < 0)
        rc = -1;
    if (rc == 0 && !(snap->seen & (1u << OT_SEC_META))) {
        snprintf(errbuf, OT_ERRBUF, "the snapshot has no process and trigger details (%zu parts read): not a whole snapshot",
                 snap->nsections);
        rc = -1;
    }
    if (rc < 0) {
        ot_snapshot_free(snap);
        return -1;
    }
    ot_fw_settle(snap);
    return 0;
}

void ot_snapshot_free(struct ot_snapshot *snap)
{
    ot_u64map_free(&snap->stack_index);
    ot_u64map_free(&snap->pyframe_index);
    ot_u64map_free(&snap->symbol_index);
    ot_arena_free(&snap->arena);
    memset(snap, 0, sizeof(*snap));
}
