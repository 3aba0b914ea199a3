/* The damage modes' names (--corrupt, --help), and the damage done to the finished bytes. The modes that
 * need a section written wrong are applied where it is written (sections.c, framework.c, simulate.c). */
#include "snapgen.h"

const char *const corrupt_names[C_COUNT] = {
    [C_NONE] = "none",
    [C_TRUNCATED] = "truncated",
    [C_BAD_MAGIC] = "bad-magic",
    [C_BAD_VERSION] = "bad-version",
    [C_SECTION_PAST_EOF] = "section-past-eof",
    [C_BAD_ZSTD] = "bad-zstd",
    [C_HUGE_COUNT] = "huge-count",
    [C_VARINT_OVERFLOW] = "varint-overflow",
    [C_RAW_LEN_CAP] = "raw-len-cap",
    [C_ZSTD_SIZE_MISMATCH] = "zstd-size-mismatch",
    [C_CHUNK_ZSTD] = "chunk-zstd",
    [C_EVENT_TRUNCATED] = "event-truncated",
    [C_CHUNK_COUNT] = "chunk-count",
    [C_NO_META] = "no-meta",
    [C_SHORT_HEADER] = "short-header",
    [C_FIELD_PAST_END] = "field-past-end",
    [C_DUP_SECTION] = "duplicate-section",
    [C_DUP_STACK] = "duplicate-stack",
    [C_STRING_PAST_END] = "string-past-end",
    [C_SECTION_FLAGS] = "section-flags",
    [C_RAW_MISMATCH] = "raw-mismatch",
    [C_HEADER_CUT] = "header-cut",
    [C_PEAK_REF_COUNT] = "peak-ref-count",
    [C_LIVE_SEQ_SHORT] = "live-seq-short",
    [C_BOTH_LIVE] = "both-live",
    [C_PEAK_REF_NO_LIVE] = "peak-ref-no-live",
    [C_BORROWED_STACK] = "borrowed-stack",
    [C_BORROWED_UNFLAGGED] = "borrowed-unflagged",
    [C_BORROWED_COUNT] = "borrowed-count",
    [C_CTX_ORDER] = "ctx-freed-order",
    [C_CTX_OVERLIST] = "ctx-freed-overlist",
    [C_CTX_COUNT] = "ctx-freed-count",
    [C_CTX_SIZE] = "ctx-freed-size",
    [C_FW_LAYOUT] = "fw-layout",
    [C_FW_RECORD_PAST_END] = "fw-record-past-end",
    [C_FW_BODY_LEFTOVER] = "fw-body-leftover",
    [C_FW_INFO_SHORT] = "fw-info-short",
    [C_FW_STATS_COUNT] = "fw-stats-count",
    [C_FW_SETTINGS_SHORT] = "fw-settings-short",
    [C_FW_SEGMENT_COLUMNS] = "fw-segment-columns",
    [C_FW_SEGMENT_BLOCKS] = "fw-segment-blocks",
    [C_FW_SEGMENT_WRAP] = "fw-segment-wrap",
    [C_FW_BLOCK_STATE] = "fw-block-state",
    [C_FW_BLOCK_SEGMENT] = "fw-block-segment",
    [C_FW_BLOCK_OUTSIDE] = "fw-block-outside",
    [C_FW_DUP_SEGMENTS] = "fw-duplicate-segments",
    [C_FW_ARRAYS_SHORT] = "fw-arrays-short",
    [C_FW_ERROR_SHORT] = "fw-error-short",
    [C_FW_FRAMES_BLOCK] = "fw-frames-block",
    [C_FW_ROLES_LABEL] = "fw-roles-label",
    [C_FW_STEPS_SHORT] = "fw-steps-short",
    [C_PROBES_COUNT] = "probes-count",
    [C_PROCESS_DETAILS_COUNT] = "process-details-count",
    [C_PROCESS_DETAILS_SHORT] = "process-details-short",
};

/* Damage applied to the finished bytes. */
void corrupt_file(void)
{
    struct secinfo *s;
    switch (cfg.corrupt) {
    case C_TRUNCATED:
        snap.n = snap.n * 2 / 3;
        break;
    case C_BAD_MAGIC:
        snap.p[0] = 'X';
        break;
    case C_SECTION_PAST_EOF:
        s = &secs[nsecs - 1]; /* stored_len 1000 bytes longer than what is left */
        for (int i = 0; i < 8; i++)
            snap.p[s->hdr_off + 8 + i] = (uint8_t)((s->stored_len + 1000) >> (8 * i));
        break;
    case C_BAD_ZSTD:
        s = find_section(OT_SEC_STACKS);
        if (s && s->compressed)
            snap.p[s->payload_off] ^= 0xff;
        break;
    case C_RAW_LEN_CAP:
        s = find_section(OT_SEC_LIVE);
        if (s)
            for (int i = 0; i < 8; i++)
                snap.p[s->hdr_off + 16 + i] = (uint8_t)((5ULL << 30) >> (8 * i));
        break;
    case C_ZSTD_SIZE_MISMATCH:
        s = find_section(OT_SEC_LIVE);
        if (s && s->compressed)
            snap.p[s->hdr_off + 16]++; /* raw_len one more than the frame holds */
        break;
    case C_SHORT_HEADER:
        snap.n = 20;
        break;
    case C_SECTION_FLAGS:
        s = find_section(OT_SEC_DEVICES);
        if (s)
            snap.p[s->hdr_off + 4] |= 0x4;
        break;
    case C_RAW_MISMATCH:
        s = find_section(OT_SEC_DEVICES);
        if (s)
            snap.p[s->hdr_off + 16]++;
        break;
    case C_HEADER_CUT:
        snap.n = secs[nsecs - 1].hdr_off + 10;
        break;
    default:
        break;
    }
}
