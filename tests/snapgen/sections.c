/* The sections of the tracer's own writer, from the simulated run: META, DEVICES, FAILURE, MODULES,
 * SYMBOLS, PYFRAMES, STACKS, BORROWED, the live set and peaks (LIVE and PEAK, or LIVE_SEQ and PEAK_REF),
 * EVENTS, MARKERS, POOLS, MAPPINGS, PROCESSES, THREADS; and write_file, which puts them in the order the
 * tracer writes them. The damage modes that need a section written wrong are applied here, as it is
 * written; those that damage finished bytes are in damage.c. */
#include "snapgen.h"

#include <inttypes.h>

static uint64_t chunks_kept_from(void)
{
    return cfg.drop_chunks < sim.nchunks ? cfg.drop_chunks : sim.nchunks;
}

static uint64_t events_in(size_t from, size_t to)
{
    uint64_t n = 0;
    for (size_t i = from; i < to; i++)
        n += sim.chunks[i].nevents;
    return n;
}

static uint64_t ring_used(void)
{
    uint64_t n = 0;
    for (size_t i = chunks_kept_from(); i < sim.nchunks; i++)
        n += sim.chunks[i].frame_len;
    return n;
}

static void write_meta(void)
{
    struct buf b = {0};
    put_cstr(&b, "0.1.0-snapgen");
    put_uv(&b, (uint64_t)cfg.trigger);
    /* A framework's refusal: the library is told which framework refused (its reason), as the companion says. */
    const char *fw = !cfg.frameworks ? "framework" : cfg.frameworks & FW_TORCH ? "torch" : cfg.frameworks & FW_JAX ? "jax" : "cupy";
    put_cstr(&b, cfg.trigger == OT_TRIGGER_SIGNAL ? "SIGUSR1" : cfg.trigger == OT_TRIGGER_API ? "after epoch 3"
                 : cfg.trigger == OT_TRIGGER_FRAMEWORK_OOM ? fw : "");
    if (cfg.corrupt == C_VARINT_OVERFLOW) {
        static const uint8_t eleven[] = {0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01};
        put_bytes(&b, eleven, sizeof(eleven));
    } else {
        put_uv(&b, 4242);
    }
    put_uv(&b, 4200);
    if (cfg.hostile)
        put_str(&b, "evil\x1b]0;pwned\x07host\n\"\\\0nul", sizeof("evil\x1b]0;pwned\x07host\n\"\\\0nul") - 1);
    else
        put_cstr(&b, "snapgen-host");
    char seed[32];
    snprintf(seed, sizeof(seed), "%" PRIu64, cfg.seed);
    const char *argv[] = {"python3", "train.py", "--batch-size", "64", "--seed", seed,
                          cfg.hostile ? "\xff\xfe\x1b[31mred" : "--fast"};
    put_uv(&b, 7);
    for (int i = 0; i < 7; i++)
        put_cstr(&b, argv[i]);
    put_cstr(&b, "/opt/conda/bin/python3.12");
    put_uv(&b, 1735689600ULL * 1000000000ULL + (sim.t - sim.start_t));
    put_uv(&b, sim.t + 1000);
    put_uv(&b, sim.start_t);
    put_sv(&b, 3);
    put_sv(&b, 3);
    put_sv(&b, 8);
    put_cstr(&b, "RANK");
    size_t from = chunks_kept_from();
    uint64_t kept = events_in(from, sim.nchunks), dropped = events_in(0, from);
    put_uv(&b, kept + dropped);
    put_uv(&b, kept);
    put_uv(&b, dropped);
    put_uv(&b, from);
    uint64_t budget = 64ULL << 20; /* OOMTRACE_RING; a long run gets a budget its ring fits in */
    while (budget < ring_used())
        budget *= 2;
    put_uv(&b, budget);
    put_uv(&b, ring_used());
    put_uv(&b, 1);
    put_cstr(&b, "3.12.3");
    put_cstr(&b, "0,1,2,3");
    if (cfg.future)
        put_cstr(&b, "a field from a later minor version");
    section(OT_SEC_META, &b, false);
}

static void write_devices(void)
{
    struct buf b = {0};
    put_uv(&b, cfg.devices);
    for (uint64_t d = 0; d < cfg.devices; d++) {
        struct dev_state *ds = &sim.dev[d];
        put_sv(&b, (int64_t)d);
        put_cstr(&b, "NVIDIA H100 80GB HBM3 (synthetic)");
        uint8_t uuid[16];
        for (int i = 0; i < 16; i++)
            uuid[i] = (uint8_t)(0x10 * d + (uint64_t)i);
        put_str(&b, (const char *)uuid, 16);
        put_uv(&b, 0x3); /* total/free known, baseline known */
        put_uv(&b, device_total((int64_t)d));
        put_uv(&b, device_free((int64_t)d));
        put_uv(&b, BASELINE);
        put_uv(&b, ds->tracked);
        put_uv(&b, ds->peak);
        put_uv(&b, ds->peak_t);
        put_uv(&b, ds->peak_seq);
        put_uv(&b, OT_CAT_COUNT);
        for (int c = 0; c < OT_CAT_COUNT; c++)
            put_uv(&b, ds->by_cat[c]);
    }
    if (cfg.future)
        put_uv(&b, 12345); /* bytes appended by a later minor version: a reader ignores them */
    if (cfg.corrupt == C_FIELD_PAST_END)
        b.n -= 5;
    section(OT_SEC_DEVICES, &b, false);
}

static void write_failure(void)
{
    if (cfg.trigger == OT_TRIGGER_FRAMEWORK_OOM) {
        write_framework_failure();
        return;
    }
    if (!sim.has_failed)
        return;
    struct buf b = {0};
    put_uv(&b, sim.failed.api);
    put_uv(&b, sim.failed.cat);
    put_sv(&b, sim.failed.dev);
    put_uv(&b, sim.failed.size);
    put_uv(&b, 2); /* CUDA_ERROR_OUT_OF_MEMORY */
    put_uv(&b, sim.failed.t);
    put_uv(&b, sim.failed.tid);
    put_uv(&b, sim.failed.stack);
    put_uv(&b, sim.failed.seq);
    section(OT_SEC_FAILURE, &b, false);
}

static void write_modules_symbols_pyframes(void)
{
    struct buf b = {0};
    put_uv(&b, nmodules);
    for (size_t i = 0; i < nmodules; i++) {
        put_cstr(&b, modules[i].path);
        put_uv(&b, modules[i].start);
        put_uv(&b, modules[i].end);
        put_uv(&b, modules[i].bias);
        put_str(&b, (const char *)modules[i].build_id, modules[i].build_id_len);
    }
    section(OT_SEC_MODULES, &b, false);

    put_uv(&b, nsyms);
    for (size_t i = 0; i < nsyms; i++) {
        put_uv(&b, syms[i].addr);
        put_cstr(&b, syms[i].name);
        put_uv(&b, syms[i].off);
    }
    section(OT_SEC_SYMBOLS, &b, cfg.compress);

    put_uv(&b, npys);
    for (size_t i = 0; i < npys; i++) {
        put_uv(&b, pys[i].id);
        put_cstr(&b, pys[i].func);
        put_cstr(&b, pys[i].file);
        put_uv(&b, pys[i].line);
    }
    section(OT_SEC_PYFRAMES, &b, cfg.compress);
}

static void write_stacks(void)
{
    struct buf b = {0};
    put_uv(&b, nstacks + (cfg.corrupt == C_DUP_STACK ? 1 : 0));
    for (size_t i = 0; i < nstacks; i++) {
        put_uv(&b, stacks[i].id);
        put_uv(&b, stacks[i].flags);
        put_uv(&b, stacks[i].n);
        for (size_t k = 0; k < stacks[i].n; k++)
            put_uv(&b, stacks[i].frames[k]);
    }
    if (cfg.corrupt == C_DUP_STACK) {
        put_uv(&b, stacks[0].id);
        put_uv(&b, 0);
        put_uv(&b, 0);
    }
    if (cfg.corrupt == C_STRING_PAST_END) {
        /* Not a string, but the same failure: a frame count far past the payload. */
        b.n = 0;
        put_uv(&b, 1);
        put_uv(&b, 1);
        put_uv(&b, 0);
        put_uv(&b, 1000);
        put_uv(&b, 2);
    }
    section(OT_SEC_STACKS, &b, cfg.compress && cfg.corrupt != C_STRING_PAST_END);
    if (!cfg.borrowed)
        return;
    /* Every stack flagged borrowed (make_*_stacks: every fifth), lent by the main thread (the pid), by
     * another thread, or by one the tracer could not name (0). */
    size_t n = 0;
    for (size_t i = 0; i < nstacks; i++)
        n += (stacks[i].flags & OT_STACK_BORROWED) != 0;
    put_uv(&b, n + (cfg.corrupt == C_BORROWED_COUNT ? 1000 : 0));
    for (size_t i = 0, k = 0; i < nstacks; i++) {
        if (!(stacks[i].flags & OT_STACK_BORROWED))
            continue;
        put_uv(&b, stacks[i].id + (cfg.corrupt == C_BORROWED_STACK && k == 0 ? 1000000 : 0));
        put_uv(&b, k % 3 == 0 ? 4242 : k % 3 == 1 ? 4250 + k : 0);
        k++;
    }
    if (cfg.corrupt == C_BORROWED_UNFLAGGED) {
        for (size_t i = 0; i < nstacks; i++)
            if (!(stacks[i].flags & OT_STACK_BORROWED)) {
                b.n = 0;
                put_uv(&b, 1);
                put_uv(&b, stacks[i].id);
                put_uv(&b, 4242);
                break;
            }
    }
    section(OT_SEC_BORROWED, &b, cfg.compress);
}

/* snapgen's record, field by field in the order of OT_RECORD_FIELDS. */
#define REC_address(r) (r)->addr
#define REC_size(r) (r)->size
#define REC_device(r) (uint64_t)(r)->dev
#define REC_category(r) (r)->cat
#define REC_api(r) (r)->api
#define REC_flags(r) (r)->flags
#define REC_stack_id(r) (r)->stack
#define REC_tid(r) (r)->tid
#define REC_time_ns(r) (r)->t
#define REC_seq(r) (r)->seq

/* One field, coded as the format says. */
static void put_field(struct buf *b, enum ot_coding coding, uint64_t v, uint64_t prev)
{
    uint8_t tmp[10];
    put_bytes(b, tmp, (size_t)(ot_put_field(tmp, coding, v, prev) - tmp));
}

static void put_record(struct buf *b, const struct rec *r)
{
#define OT_X_PUT(col, name, coding, seq_coding, doc) put_field(b, OT_CODING_##coding, REC_##name(r), 0);
    OT_RECORD_FIELDS(OT_X_PUT)
#undef OT_X_PUT
}

static int cmp_rec_seq(const void *a, const void *b)
{
    uint64_t x = ((const struct rec *)a)->seq, y = ((const struct rec *)b)->seq;
    return x < y ? -1 : x > y;
}

/* The tracer's form since 1.1 (docs/FORMAT.md): LIVE_SEQ, column by column in seq order, and PEAK_REF,
 * which writes only the peak records no longer live. */
static void write_live_seq_peak_refs(void)
{
    struct buf b = {0};
    struct rec *r = malloc((sim.npersist ? sim.npersist : 1) * sizeof *r);
    if (!r) {
        fprintf(stderr, "snapgen: out of memory\n");
        exit(1);
    }
    memcpy(r, sim.persist, sim.npersist * sizeof *r);
    qsort(r, sim.npersist, sizeof *r, cmp_rec_seq);
    size_t n = sim.npersist;
    if (cfg.corrupt == C_BOTH_LIVE) {
        put_uv(&b, n);
        for (size_t i = 0; i < n; i++)
            put_record(&b, &r[i]);
        section(OT_SEC_LIVE, &b, cfg.compress);
    }
    put_uv(&b, cfg.corrupt == C_LIVE_SEQ_SHORT ? n + 1 : n);
#define OT_X_COL(col, name, coding, seq_coding, doc)                                                   \
    for (size_t i = 0; i < n; i++)                                                                     \
        put_field(&b, OT_CODING_##seq_coding, REC_##name(&r[i]), i ? REC_##name(&r[i - 1]) : 0);
    OT_RECORD_FIELDS(OT_X_COL)
#undef OT_X_COL
    if (cfg.corrupt == C_PEAK_REF_NO_LIVE)
        b.n = 0;
    else
        section(OT_SEC_LIVE_SEQ, &b, cfg.compress);

    for (uint64_t d = 0; d < cfg.devices; d++) {
        struct dev_state *ds = &sim.dev[d];
        uint64_t shared = 0;
        for (size_t i = 0; i < n; i++)
            shared += ot_peak_ref_shares(r[i].dev, r[i].cat, r[i].seq, (int64_t)d, ds->peak_seq);
        put_sv(&b, (int64_t)d);
        put_uv(&b, ds->peak);
        put_uv(&b, ds->peak_t);
        put_uv(&b, ds->peak_seq);
        put_uv(&b, shared + ds->peak_ntemps + (cfg.corrupt == C_PEAK_REF_COUNT));
        put_uv(&b, 0); /* lost */
        put_uv(&b, ds->peak_ntemps);
        for (size_t i = 0; i < ds->peak_ntemps; i++)
            put_record(&b, &ds->peak_temps[i]);
        section(OT_SEC_PEAK_REF, &b, cfg.compress);
    }
    free(r);
}

static void write_live_peaks(void)
{
    if (cfg.seq_order) {
        write_live_seq_peak_refs();
        return;
    }
    struct buf b = {0};
    put_uv(&b, cfg.corrupt == C_HUGE_COUNT ? (1ULL << 60) : sim.npersist);
    for (size_t i = 0; i < sim.npersist; i++)
        put_record(&b, &sim.persist[i]);
    section(OT_SEC_LIVE, &b, cfg.compress);

    for (uint64_t d = 0; d < cfg.devices; d++) {
        struct dev_state *ds = &sim.dev[d];
        put_sv(&b, (int64_t)d);
        put_uv(&b, ds->peak);
        put_uv(&b, ds->peak_t);
        put_uv(&b, ds->peak_seq);
        put_uv(&b, ds->peak_npersist + ds->peak_ntemps);
        for (size_t i = 0; i < ds->peak_npersist; i++)
            put_record(&b, &sim.persist[i]);
        for (size_t i = 0; i < ds->peak_ntemps; i++)
            put_record(&b, &ds->peak_temps[i]);
        section(OT_SEC_PEAK, &b, cfg.compress);
    }
}

static void write_events(void)
{
    struct buf b = {0};
    size_t from = chunks_kept_from();
    put_uv(&b, sim.nchunks - from);
    for (size_t i = from; i < sim.nchunks; i++) {
        struct chunk *c = &sim.chunks[i];
        put_uv(&b, c->first_seq);
        put_uv(&b, cfg.corrupt == C_CHUNK_COUNT && i == from ? c->raw_len : c->nevents);
        put_uv(&b, c->t0);
        put_uv(&b, c->raw_len);
        if (cfg.corrupt == C_CHUNK_ZSTD && i == (from + sim.nchunks) / 2)
            c->frame[0] ^= 0xff; /* the frame's magic number */
        put_str(&b, (const char *)c->frame, c->frame_len);
    }
    section(OT_SEC_EVENTS, &b, false);
}

static void write_rest(void)
{
    struct buf b = {0};
    uint64_t nm = sim.nmarkers < 1024 ? sim.nmarkers : 1024;
    put_uv(&b, nm);
    for (uint64_t i = sim.nmarkers - nm; i < sim.nmarkers; i++) {
        struct marker *m = &sim.markers[i % 1024];
        put_uv(&b, m->seq);
        put_uv(&b, m->t);
        put_uv(&b, m->tid);
        put_cstr(&b, m->label);
    }
    section(OT_SEC_MARKERS, &b, cfg.compress);

    put_uv(&b, cfg.devices + 1);
    for (uint64_t d = 0; d < cfg.devices; d++) {
        uint64_t used = sim.dev[d].by_cat[OT_CAT_ASYNC];
        put_uv(&b, 0x5000 + d);
        put_sv(&b, (int64_t)d);
        put_uv(&b, 0x1);
        put_uv(&b, (used + (1ULL << 30)) & ~((1ULL << 29) - 1));
        put_uv(&b, used);
    }
    put_uv(&b, 0x6000);
    put_sv(&b, 0);
    put_uv(&b, 0x2); /* attributes unreadable */
    put_uv(&b, 0);
    put_uv(&b, 0);
    section(OT_SEC_POOLS, &b, false);

    size_t nmap = 0;
    for (size_t i = 0; i < sim.npersist; i++)
        nmap += sim.persist[i].cat == OT_CAT_VMM;
    put_uv(&b, nmap);
    uint64_t va = 0x7fa000000000ULL;
    for (size_t i = 0; i < sim.npersist; i++) {
        if (sim.persist[i].cat != OT_CAT_VMM)
            continue;
        put_uv(&b, va);
        put_uv(&b, sim.persist[i].size);
        put_uv(&b, sim.persist[i].addr);
        put_uv(&b, 0);
        va += (sim.persist[i].size + 0x1fffff) & ~(uint64_t)0x1fffff;
    }
    section(OT_SEC_MAPPINGS, &b, false);

    put_uv(&b, 1);
    put_cstr(&b, "");
    put_uv(&b, 2);
    put_sv(&b, 0);
    put_uv(&b, 31337);
    put_uv(&b, OTHER_PROC);
    put_cstr(&b, "other_job");
    put_sv(&b, 0);
    put_uv(&b, 4242); /* the process itself, which the reader must not count as "other" */
    put_uv(&b, sim.dev[0].tracked + CONTEXT);
    put_cstr(&b, "python3");
    /* 1.3: each one's relation, where its name came from, its command line. Damaged: a count that is not
     * the list's, or details that stop after the first. */
    put_uv(&b, 2 + (cfg.corrupt == C_PROCESS_DETAILS_COUNT ? 1 : 0));
    put_uv(&b, OT_PROCESS_RELATION_NONE);
    put_uv(&b, OT_PROCESS_NAME_PROC);
    put_cstr(&b, "other_job --serve");
    if (cfg.corrupt != C_PROCESS_DETAILS_SHORT) {
        put_uv(&b, OT_PROCESS_RELATION_SELF);
        put_uv(&b, OT_PROCESS_NAME_PROC);
        put_cstr(&b, "python3 train.py");
    }
    section(OT_SEC_PROCESSES, &b, false);

    static const char *const tn[] = {"python3", "pt_autograd_0", "pin_memory", "nccl"};
    put_uv(&b, 4);
    for (int i = 0; i < 4; i++) {
        put_uv(&b, 1000 + (uint64_t)i);
        put_cstr(&b, tn[i]);
    }
    section(OT_SEC_THREADS, &b, false);
}

/* CTX_FREED: what each context end freed, oldest first. Damaged: two ends in the wrong order, a list longer
 * than what the end freed, a count that cannot fit, or a listed size of 2^62 (more than its event freed). */
static void write_ctx_freed(void)
{
    if (!cfg.ctx_ends)
        return;
    struct buf b = {0};
    size_t n = sim.nctx_ends;
    put_uv(&b, n + (cfg.corrupt == C_CTX_COUNT ? 100000 : 0) + (cfg.corrupt == C_CTX_ORDER ? 1 : 0));
    for (size_t i = 0; i < n + (cfg.corrupt == C_CTX_ORDER ? 1 : 0); i++) {
        const struct ctx_end *ce = &sim.ctx_ends[i < n ? i : 0];
        put_uv(&b, ce->seq);
        put_uv(&b, ce->n - (cfg.corrupt == C_CTX_OVERLIST && i == 0 ? 1 : 0));
        put_uv(&b, ce->n);
        uint64_t prev = 0;
        for (size_t k = 0; k < ce->n; k++) {
            put_sv(&b, (int64_t)(ce->v[k].addr - prev));
            prev = ce->v[k].addr;
            put_uv(&b, cfg.corrupt == C_CTX_SIZE && i == 0 && k == 0 ? 1ull << 62 : ce->v[k].size);
            put_sv(&b, ce->v[k].dev);
            put_uv(&b, ce->v[k].cat);
        }
    }
    section(OT_SEC_CTX_FREED, &b, cfg.compress);
}

void write_file(void)
{
    put_bytes(&snap, OT_MAGIC, 8);
    put_le(&snap, cfg.corrupt == C_BAD_VERSION ? 2 : OT_VERSION_MAJOR, 2);
    put_le(&snap, cfg.future ? 7 : OT_VERSION_MINOR, 2);
    put_le(&snap, cfg.incomplete ? 0 : OT_FILE_COMPLETE, 4);
    put_le(&snap, 0, 8);
    put_le(&snap, 0, 8);
    if (cfg.corrupt != C_NO_META)
        write_meta();
    if (cfg.future) {
        struct buf b = {0};
        for (int i = 0; i < 100; i++)
            put_uv(&b, rnd());
        section(99, &b, true);
    }
    write_devices();
    if (cfg.corrupt == C_DUP_SECTION)
        write_devices();
    write_framework(); /* before FAILURE: a framework OOM's request comes from the framework's view */
    write_failure();
    write_modules_symbols_pyframes();
    write_stacks();
    write_live_peaks();
    write_events();
    write_rest();
    write_ctx_freed();
}
