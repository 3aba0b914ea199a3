/* The allocator's view in text, markdown and JSON (see fwview.h). Numbers come from analyze/allocview and the
 * framework's own counters; this file only lays them out. */
#include "render/fwview.h"

#include <inttypes.h>
#include <stdlib.h>

#include "analyze/stackview.h"
#include "render/doc.h"

static void put_fw(FILE *f, struct ot_str fw)
{
    const char *d = ot_fw_display_name(fw);
    if (d)
        fputs(d, f);
    else
        ot_fput_safe_max(f, fw.p ? fw : ot_cstr("a framework"), 40);
}

void ot_fwview_failure_doc(struct ot_doc *d, const struct ot_analysis *a)
{
    const struct ot_allocview *v = a->fw;
    const struct ot_snapshot *s = a->s;
    if (!v || !v->fatal)
        return;
    char fw[OT_FWVIEW_CELL], b1[32];
    ot_fw_safe_name(fw, sizeof(fw), v->fatal_framework);
    ot_doc_item(d);
    ot_doc_printf(d, "refused by %s's allocator: no driver call failed for it; this is the fatal out-of-memory", fw);
    ot_doc_item_end(d);
    if (v->error && v->error->text.n) {
        ot_doc_item(d);
        ot_doc_printf(d, "its message: ");
        ot_doc_text(d, v->error->text, 1024);
        ot_doc_item_end(d);
    }
    if (s->probes.present) {
        bool text = d->kind == OT_DOC_TEXT;
        ot_doc_item(d);
        ot_doc_printf(d, "%zu driver-level snapshot%s before it %s the framework's retries and probes of this out-of-memory",
                      s->probes.n, s->probes.n == 1 ? "" : "s", s->probes.n == 1 ? "was" : "were");
        if (s->probes.n)
            ot_doc_printf(d, ":");
        /* text: one probe a line under the item; else inline, separated by commas */
        if (text)
            ot_doc_item_end(d);
        for (size_t i = 0; i < s->probes.n && i < 8; i++) {
            const struct ot_probe *p = &s->probes.v[i];
            ot_doc_printf(d, text ? "    " : i ? ", " : " ");
            ot_doc_code(d, p->file_name, 200);
            ot_doc_printf(d, " (%s on device %" PRIu64 ")%s", ot_fmt_bytes(b1, p->requested_bytes), p->device, text ? "\n" : "");
        }
        if (s->probes.n > 8)
            ot_doc_printf(d, text ? "    ... %zu more\n" : " and %zu more", s->probes.n - 8);
        if (!text)
            ot_doc_item_end(d);
    }
    ot_doc_list_end(d);
}

void ot_fwview_failure_text(FILE *f, const struct ot_analysis *a)
{
    struct ot_doc d = {.f = f, .kind = OT_DOC_TEXT};
    ot_fwview_failure_doc(&d, a);
}

static void text_torch(FILE *f, const struct ot_analysis *a, const struct ot_allocview *v, const struct ot_fw_devview *d)
{
    const struct ot_snapshot *s = a->s;
    char b1[32], b2[32], b3[32], b4[32];
    fputs("  ", f);
    put_fw(f, d->framework);
    fprintf(f, ", device %" PRIu64 ": allocated %s of %s reserved in %zu segment%s", d->device,
            ot_fmt_bytes(b1, d->allocated_bytes), ot_fmt_bytes(b2, d->reserved_bytes), d->nsegments,
            d->nsegments == 1 ? "" : "s");
    uint64_t peak;
    if (ot_fw_stat_of(v->fw, "torch", d->device, "allocated_peak_bytes", &peak) && ot_str_eq(d->framework, "torch"))
        fprintf(f, " (peak allocated %s)", ot_fmt_bytes(b1, peak));
    fprintf(f, "\n    free inside segments %s, largest free block %s", ot_fmt_bytes(b3, d->free_bytes),
            ot_fmt_bytes(b4, d->largest_free));
    if (!v->earlier && s->has_failure && s->failure.device >= 0 && (uint64_t)s->failure.device == d->device)
        fprintf(f, " (the failed request: %s)", ot_fmt_bytes(b1, s->failure.requested_bytes));
    fputc('\n', f);
    if (d->ncached)
        fprintf(f, "    %zu segment%s with no live tensor (%s): freed by the program, kept as cache\n", d->ncached,
                d->ncached == 1 ? "" : "s", ot_fmt_bytes(b1, d->cached_bytes));
    if (d->nprivate_segments)
        fprintf(f, "    CUDA graph private pool%s: %zu, %s in %zu segment%s (%s allocated)\n",
                d->nprivate_pools == 1 ? "" : "s", d->nprivate_pools, ot_fmt_bytes(b1, d->private_bytes),
                d->nprivate_segments, d->nprivate_segments == 1 ? "" : "s", ot_fmt_bytes(b2, d->private_allocated_bytes));
    if (d->nexpandable)
        fprintf(f, "    expandable segment%s: %zu, %s\n", d->nexpandable == 1 ? "" : "s", d->nexpandable,
                ot_fmt_bytes(b1, d->expandable_bytes));
    if (d->nunjoined)
        fprintf(f, "    %zu segment%s not found among the driver allocations this snapshot lists\n", d->nunjoined,
                d->nunjoined == 1 ? "" : "s");
}

/* Not a setting: the inputs of PyTorch's step under way at an OOM (items_torch_moment says them). */
#define STEP_SHAPES_KEY "step_in_progress_input_shapes"

static void doc_fw(struct ot_doc *d, struct ot_str fw)
{
    const char *n = ot_fw_display_name(fw);
    if (n)
        ot_doc_printf(d, "%s", n);
    else
        ot_doc_text(d, fw.p ? fw : ot_cstr("a framework"), 40);
}

/* An item whose parts are lines of their own under it in text ("    part"), and follow it inline, separated
 * by "; ", in markdown and HTML. part_begin(d, i) opens the i-th part, part_end(d) closes it. */
static void part_begin(struct ot_doc *d, size_t i)
{
    ot_doc_printf(d, d->kind == OT_DOC_TEXT ? "    " : i ? "; " : " ");
}

static void part_end(struct ot_doc *d)
{
    if (d->kind == OT_DOC_TEXT)
        ot_doc_printf(d, "\n");
}

/* After the item's heading: in text the item ends there, the parts follow as lines. */
static void parts_open(struct ot_doc *d)
{
    if (d->kind == OT_DOC_TEXT)
        ot_doc_item_end(d);
}

/* "... N more WHAT" when parts were left out, then the item's end. */
static void parts_close(struct ot_doc *d, size_t shown, size_t total, const char *what)
{
    if (total > shown) {
        part_begin(d, shown);
        ot_doc_printf(d, "... %zu more %s", total - shown, what);
        part_end(d);
    }
    if (d->kind != OT_DOC_TEXT)
        ot_doc_item_end(d);
}

static void items_settings(struct ot_doc *d, const struct ot_framework *fw)
{
    for (size_t i = 0; i < fw->nsettings; i++) {
        const struct ot_fw_settings *st = &fw->settings[i];
        size_t settings = 0;
        for (size_t k = 0; k < st->n; k++)
            settings += !ot_str_eq(st->v[k].key, STEP_SHAPES_KEY);
        if (!settings)
            continue;
        ot_doc_item(d);
        doc_fw(d, st->framework);
        ot_doc_printf(d, " settings:");
        size_t shown = 0;
        for (size_t k = 0; k < st->n && shown < 16; k++) {
            if (ot_str_eq(st->v[k].key, STEP_SHAPES_KEY))
                continue;
            ot_doc_printf(d, " ");
            ot_doc_text(d, st->v[k].key, 64);
            ot_doc_printf(d, "=");
            ot_doc_text(d, st->v[k].value.n ? st->v[k].value : ot_cstr("(unset)"), 128);
            shown++;
        }
        ot_doc_item_end(d);
    }
}

/* What PyTorch said at the OOM: autograd's mode on the failing thread, the optimizer step under way and the
 * model's inputs in it (the companion's STATS of all devices and the inputs' key). */
static void items_torch_moment(struct ot_doc *d, const struct ot_snapshot *s)
{
    uint64_t grad = 0, step = 0;
    bool has_grad = ot_fw_stat(s, "torch", OT_FW_DEVICE_ALL, "grad_enabled", &grad);
    bool has_step = ot_fw_stat(s, "torch", OT_FW_DEVICE_ALL, "step_in_progress", &step);
    if (!has_grad && !has_step)
        return;
    ot_doc_item(d);
    ot_doc_printf(d, "PyTorch at the out-of-memory:");
    if (has_grad)
        ot_doc_printf(d, " autograd %s (torch.is_grad_enabled() on the failing thread)", grad ? "on" : "off");
    if (has_step) {
        ot_doc_printf(d, "%s optimizer step %" PRIu64 " under way", has_grad ? ";" : "", step);
        struct ot_str in = ot_fw_setting_get(&s->fw, "torch", STEP_SHAPES_KEY);
        if (in.p && in.n) {
            ot_doc_printf(d, ", the model's inputs ");
            ot_doc_text(d, in, 200);
        }
    }
    ot_doc_item_end(d);
}

/* CuPy's pool and JAX's devices (their own counters), and the live arrays by shape that JAX listed. */
static void items_others(struct ot_doc *d, const struct ot_framework *fw)
{
    char b1[32], b2[32], b3[32], b4[32];
    for (size_t i = 0; i < fw->nstats; i++) {
        const struct ot_fw_stats *st = &fw->stats[i];
        uint64_t dev = st->device, x, y, z;
        if (ot_str_eq(st->framework, "cupy") && ot_fw_stat_of(fw, "cupy", dev, "pool_used_bytes", &x) &&
            ot_fw_stat_of(fw, "cupy", dev, "pool_free_bytes", &y) && ot_fw_stat_of(fw, "cupy", dev, "pool_total_bytes", &z)) {
            ot_doc_item(d);
            ot_doc_printf(d, "CuPy memory pool: %s in use by arrays, %s free (freed by the program, kept by the pool),"
                          " %s in all", ot_fmt_bytes(b1, x), ot_fmt_bytes(b2, y), ot_fmt_bytes(b3, z));
            ot_doc_item_end(d);
        }
        if (ot_str_eq(st->framework, "jax") && ot_fw_stat_of(fw, "jax", dev, "bytes_in_use", &x)) {
            ot_doc_item(d);
            ot_doc_printf(d, "JAX, device %" PRIu64 ": %s in use", dev, ot_fmt_bytes(b1, x));
            if (ot_fw_stat_of(fw, "jax", dev, "bytes_limit", &y))
                ot_doc_printf(d, " of a %s limit", ot_fmt_bytes(b2, y));
            if (ot_fw_stat_of(fw, "jax", dev, "peak_bytes_in_use", &z))
                ot_doc_printf(d, " (peak %s)", ot_fmt_bytes(b3, z));
            if (ot_fw_stat_of(fw, "jax", dev, "largest_free_block_bytes", &z))
                ot_doc_printf(d, ", largest free block %s", ot_fmt_bytes(b4, z));
            struct ot_str pre = ot_fw_setting_get(fw, "jax", "preallocate_effective");
            if (pre.p)
                ot_doc_printf(d, "%s", ot_str_eq(pre, "true") ? "; preallocated at start" : "; allocating on demand");
            ot_doc_item_end(d);
        }
    }
    if (!fw->narrays)
        return;
    ot_doc_item(d);
    ot_doc_printf(d, "live arrays by shape (largest groups as listed):");
    parts_open(d);
    size_t shown = 0;
    for (; shown < fw->narrays && shown < 8; shown++) {
        const struct ot_fw_array *r = &fw->arrays[shown];
        part_begin(d, shown);
        ot_doc_printf(d, "%s in %s array%s ", ot_fmt_bytes(b1, r->bytes), ot_fmt_count(b2, r->count), r->count == 1 ? "" : "s");
        ot_doc_text(d, r->dtype, 32);
        ot_doc_printf(d, " ");
        ot_doc_text(d, r->shape, 96);
        ot_doc_printf(d, " on device %" PRIu64, r->device);
        part_end(d);
    }
    parts_close(d, shown, fw->narrays, "groups");
}

/* The segments by the call site whose driver allocation holds them (the join's creators), at most top. */
static void items_creators(struct ot_doc *d, const struct ot_analysis *a, const struct ot_allocview *v, size_t top)
{
    if (!v->ncreators)
        return;
    char b1[32], b2[32], b3[32];
    ot_doc_item(d);
    ot_doc_printf(d, "segments by the call site whose driver allocation holds them:");
    parts_open(d);
    size_t n = v->ncreators < top ? v->ncreators : top;
    for (size_t i = 0; i < n; i++) {
        const struct ot_fw_creator *c = &v->creators[i];
        part_begin(d, i);
        ot_doc_printf(d, "%s reserved, %s allocated, %s free in %zu segment%s", ot_fmt_bytes(b1, c->reserved_bytes),
                      ot_fmt_bytes(b2, c->allocated_bytes), ot_fmt_bytes(b3, c->free_bytes), c->nsegments,
                      c->nsegments == 1 ? "" : "s");
        if (c->ncached)
            ot_doc_printf(d, " (%zu with no live tensor)", c->ncached);
        if (c->has_stack) {
            struct ot_stack_info si;
            ot_stack_info(a->res, a->s, c->stack_id, &si);
            ot_doc_printf(d, ": ");
            if (d->kind == OT_DOC_TEXT) {
                ot_put_headline(d->f, &si, false);
            } else {
                char *h = ot_headline_str(&si, false);
                ot_doc_text(d, ot_cstr(h ? h : "(unknown stack)"), 1024);
                free(h);
            }
            if (d->kind == OT_DOC_TEXT) /* markdown and HTML cite only the stacks their tables show */
                ot_doc_printf(d, " (stack %" PRIu64 ")", c->stack_id);
        } else {
            ot_doc_printf(d, ": no driver allocation found");
        }
        part_end(d);
    }
    parts_close(d, n, v->ncreators, "sites (--top)");
}

const struct ot_allocview *ot_fwview_shown(const struct ot_analysis *a)
{
    return a->fw && a->fw->present ? a->fw : a->fw_earlier && a->fw_earlier->present ? a->fw_earlier : NULL;
}

/* The view's lines besides PyTorch's per-device ones (text) or table (markdown, HTML): one list item each. */
static void fwview_items(struct ot_doc *d, const struct ot_analysis *a, const struct ot_allocview *v, size_t top)
{
    items_settings(d, v->fw);
    items_torch_moment(d, a->s);
    items_others(d, v->fw);
    items_creators(d, a, v, top);
    if (v->blocks_with_stacks) {
        ot_doc_item(d);
        ot_doc_printf(d, "%" PRIu64 " block%s carry the Python stack that allocated them (OOMTRACE_TORCH_STACKS=python)",
                      v->blocks_with_stacks, v->blocks_with_stacks == 1 ? "" : "s");
        ot_doc_item_end(d);
    }
    ot_doc_list_end(d);
}

static void fwview_body(FILE *f, const struct ot_analysis *a, const struct ot_allocview *v, size_t top)
{
    for (size_t i = 0; i < v->ndevs; i++)
        text_torch(f, a, v, &v->devs[i]);
    struct ot_doc d = {.f = f, .kind = OT_DOC_TEXT};
    fwview_items(&d, a, v, top);
}

/* "12.3 s", "450 ms", "0.042 ms" */
static const char *fmt_span(char *buf, size_t len, uint64_t ns)
{
    if (ns < 1000000ull)
        snprintf(buf, len, "%.3f ms", (double)ns / 1e6);
    else if (ns < 1000000000ull)
        snprintf(buf, len, "%.0f ms", (double)ns / 1e6);
    else
        snprintf(buf, len, "%.1f s", (double)ns / 1e9);
    return buf;
}

void ot_fwview_earlier_words(char *out, size_t len, const struct ot_analysis *a)
{
    const struct ot_allocview *v = a->fw_earlier;
    const struct ot_fw_when *w = &a->s->fw_when;
    out[0] = 0;
    if (!v || !v->present || !w->known)
        return;
    const bool failure = a->s->has_failure &&
                         (a->s->meta.trigger == OT_TRIGGER_OOM || a->s->meta.trigger == OT_TRIGGER_FRAMEWORK_OOM);
    const char *moment = failure ? "the failure" : "this snapshot";
    char span[32], fw[OT_FWVIEW_CELL], n1[32], n2[32];
    ot_fw_safe_name(fw, sizeof(fw), v->info ? v->info->framework : (struct ot_str){NULL, 0});
    size_t o = 0;
#define PUT(...) (o += (size_t)snprintf(out + o, o < len ? len - o : 0, __VA_ARGS__), o = o < len ? o : len - 1)
    if (w->moment_ns > w->taken_ns)
        PUT("taken %s before %s", fmt_span(span, sizeof(span), w->moment_ns - w->taken_ns), moment);
    else
        PUT("taken for an earlier moment than %s", moment);
    struct ot_str why = v->info ? v->info->reason : (struct ot_str){NULL, 0};
    if (ot_str_eq(why, "oom"))
        PUT(", at %s's own out-of-memory error", fw);
    else if (ot_str_eq(why, "api"))
        PUT(", at oomtrace.dump()");
    else if (ot_str_eq(why, "exit"))
        PUT(", at exit");
    if (w->allocations || w->frees)
        PUT("; %s%s device allocation%s and %s free%s came between", w->counts_partial ? "at least " : "",
            ot_fmt_count(n1, w->allocations), w->allocations == 1 ? "" : "s", ot_fmt_count(n2, w->frees),
            w->frees == 1 ? "" : "s");
    else if (w->counts_partial)
        PUT("; the ring no longer holds all that came between");
    if (v->start_read)
        PUT(": not the state at %s; no share, statement or remedy above uses it but for JAX's preallocation and pool "
            "limit, fixed when JAX started", moment);
    else
        PUT(": not the state at %s, and no share, statement or remedy above uses it", moment);
#undef PUT
}

uint64_t ot_fwview_reporters(struct ot_doc *d, const struct ot_allocview *v)
{
    /* Every framework of the collection: the first alone named CuPy above a PyTorch table. */
    uint64_t ns = 0;
    for (size_t i = 0; i < v->fw->ninfo; i++) {
        const struct ot_fw_info *in = &v->fw->info[i];
        char name[OT_FWVIEW_CELL];
        ot_fw_safe_name(name, sizeof(name), in->framework);
        ot_doc_printf(d, "%s%s", i == 0 ? "" : i + 1 == v->fw->ninfo ? " and " : ", ", name);
        if (in->version.n) {
            ot_doc_printf(d, " ");
            ot_doc_text(d, in->version, 40);
        }
        ns += in->collect_ns;
    }
    return ns;
}

void ot_fwview_text(FILE *f, const struct ot_analysis *a, size_t top)
{
    const struct ot_allocview *v = ot_fwview_shown(a);
    if (!v)
        return;
    /* The body first, so that a framework that reported nothing (PyTorch imported, built without CUDA)
     * gets one line instead of a heading with nothing under it. */
    char *body = NULL;
    size_t blen = 0;
    FILE *m = open_memstream(&body, &blen);
    bool buffered = false;
    if (m) {
        fwview_body(m, a, v, top);
        buffered = fclose(m) == 0;
    }
    fputs(v->earlier ? "\nAllocator's view, earlier (as the frameworks reported it" : "\nAllocator's view (as the frameworks reported it", f);
    if (v->info) {
        fputs(": ", f);
        struct ot_doc d = {.f = f, .kind = OT_DOC_TEXT};
        uint64_t ns = ot_fwview_reporters(&d, v);
        char tb[48];
        fprintf(f, ", %s, collection took %.1f ms", ot_fmt_reltime(tb, v->info->taken_ns, a->s->meta.start_mono_ns),
                (double)ns / 1e6);
    }
    if (v->earlier) {
        char words[512];
        ot_fwview_earlier_words(words, sizeof(words), a);
        if (words[0])
            fprintf(f, "; %s", words);
    }
    if (buffered && !blen) {
        fputs("): it reported no device memory of its own\n", f);
    } else {
        fputs("):\n", f);
        if (buffered)
            fwrite(body, 1, blen, f);
        else
            fwview_body(f, a, v, top);
    }
    free(body);
}

/* ---- JSON ---- */

static void json_stats(struct ot_json *j, const struct ot_framework *fw)
{
    ot_json_arr(j, "stats");
    for (size_t i = 0; i < fw->nstats; i++) {
        const struct ot_fw_stats *st = &fw->stats[i];
        ot_json_obj(j, NULL);
        ot_json_str(j, "framework", st->framework);
        ot_json_u64_or_null(j, "device", st->device != OT_FW_DEVICE_ALL, st->device);
        ot_json_arr(j, "values");
        for (size_t k = 0; k < st->n; k++) {
            ot_json_obj(j, NULL);
            ot_json_str(j, "key", st->v[k].key);
            ot_json_i64(j, "value", st->v[k].value);
            ot_json_obj_end(j);
        }
        ot_json_arr_end(j);
        ot_json_obj_end(j);
    }
    ot_json_arr_end(j);
    ot_json_arr(j, "settings");
    for (size_t i = 0; i < fw->nsettings; i++) {
        const struct ot_fw_settings *st = &fw->settings[i];
        for (size_t k = 0; k < st->n; k++) {
            ot_json_obj(j, NULL);
            ot_json_str(j, "framework", st->framework);
            ot_json_str(j, "key", st->v[k].key);
            ot_json_str(j, "value", st->v[k].value);
            ot_json_obj_end(j);
        }
    }
    ot_json_arr_end(j);
}

void ot_fwview_json(struct ot_json *j, const struct ot_analysis *a)
{
    const struct ot_allocview *v = ot_fwview_shown(a);
    const struct ot_snapshot *s = a->s;
    if (!v) {
        ot_json_null(j, "frameworks");
        return;
    }
    ot_json_obj(j, "frameworks");
    if (v->info) {
        ot_json_str(j, "framework", v->info->framework);
        ot_json_str(j, "version", v->info->version);
        ot_json_str(j, "reason", v->info->reason);
        ot_json_u64(j, "taken_ns", v->info->taken_ns);
        ot_json_u64(j, "collect_ns", v->info->collect_ns);
    }
    ot_json_bool(j, "earlier", v->earlier);
    if (v->earlier) {
        const struct ot_fw_when *w = &s->fw_when;
        ot_json_obj(j, "between");
        ot_json_u64(j, "moment_ns", w->moment_ns);
        ot_json_u64(j, "span_ns", w->moment_ns > w->taken_ns ? w->moment_ns - w->taken_ns : 0);
        ot_json_u64(j, "allocations", w->allocations);
        ot_json_u64(j, "frees", w->frees);
        ot_json_bool(j, "partial", w->counts_partial);
        ot_json_obj_end(j);
    }
    /* The snapshot's, whichever view is shown (an earlier view in a framework's out-of-memory snapshot). */
    const struct ot_allocview *now = a->fw ? a->fw : v;
    ot_json_bool(j, "fatal", now->fatal);
    if (now->fatal)
        ot_json_str(j, "fatal_framework", now->fatal_framework);
    if (v->error) {
        ot_json_obj(j, "error");
        ot_json_str(j, "framework", v->error->framework);
        ot_json_str(j, "text", v->error->text);
        ot_json_u64(j, "device", v->error->device);
        ot_json_u64_or_null(j, "request_bytes", v->error->request_bytes != 0, v->error->request_bytes);
        ot_json_obj_end(j);
    }
    if (s->probes.present) {
        ot_json_arr(j, "probes");
        for (size_t i = 0; i < s->probes.n; i++) {
            const struct ot_probe *p = &s->probes.v[i];
            ot_json_obj(j, NULL);
            ot_json_str(j, "file", p->file_name);
            ot_json_u64(j, "failure_seq", p->failure_seq);
            ot_json_u64(j, "requested_bytes", p->requested_bytes);
            ot_json_u64(j, "device", p->device);
            ot_json_obj_end(j);
        }
        ot_json_arr_end(j);
    }
    ot_json_arr(j, "allocators");
    for (size_t i = 0; i < v->ndevs; i++) {
        const struct ot_fw_devview *d = &v->devs[i];
        ot_json_obj(j, NULL);
        ot_json_str(j, "framework", d->framework);
        ot_json_u64(j, "device", d->device);
        ot_json_u64(j, "segments", d->nsegments);
        ot_json_u64(j, "reserved_bytes", d->reserved_bytes);
        ot_json_u64(j, "allocated_bytes", d->allocated_bytes);
        ot_json_u64(j, "free_in_segments_bytes", d->free_bytes);
        ot_json_u64(j, "largest_free_block_bytes", d->largest_free);
        ot_json_u64(j, "default_pools_free_bytes", d->default_free_bytes);
        ot_json_u64(j, "cached_segments", d->ncached);
        ot_json_u64(j, "cached_bytes", d->cached_bytes);
        ot_json_u64(j, "graph_pools", d->nprivate_pools);
        ot_json_u64(j, "graph_pool_segments", d->nprivate_segments);
        ot_json_u64(j, "graph_pool_bytes", d->private_bytes);
        ot_json_u64(j, "graph_pool_allocated_bytes", d->private_allocated_bytes);
        ot_json_u64(j, "expandable_segments", d->nexpandable);
        ot_json_u64(j, "expandable_bytes", d->expandable_bytes);
        ot_json_u64(j, "segments_without_driver_allocation", d->nunjoined);
        ot_json_obj_end(j);
    }
    ot_json_arr_end(j);
    ot_json_arr(j, "creators");
    for (size_t i = 0; i < v->ncreators; i++) {
        const struct ot_fw_creator *c = &v->creators[i];
        ot_json_obj(j, NULL);
        ot_json_u64_or_null(j, "stack_id", c->has_stack, c->stack_id);
        ot_json_u64(j, "segments", c->nsegments);
        ot_json_u64(j, "cached_segments", c->ncached);
        ot_json_u64(j, "reserved_bytes", c->reserved_bytes);
        ot_json_u64(j, "allocated_bytes", c->allocated_bytes);
        ot_json_u64(j, "free_bytes", c->free_bytes);
        ot_json_u64(j, "cached_bytes", c->cached_bytes);
        ot_json_obj_end(j);
    }
    ot_json_arr_end(j);
    json_stats(j, v->fw);
    ot_json_arr(j, "arrays");
    for (size_t i = 0; i < v->fw->narrays; i++) {
        const struct ot_fw_array *r = &v->fw->arrays[i];
        ot_json_obj(j, NULL);
        ot_json_str(j, "framework", r->framework);
        ot_json_str(j, "dtype", r->dtype);
        ot_json_str(j, "shape", r->shape);
        ot_json_u64(j, "device", r->device);
        ot_json_u64(j, "count", r->count);
        ot_json_u64(j, "bytes", r->bytes);
        ot_json_obj_end(j);
    }
    ot_json_arr_end(j);
    ot_json_u64(j, "blocks_with_stacks", v->blocks_with_stacks);
    ot_json_obj_end(j);
}

/* ---- the allocator table (markdown and HTML) ---- */

const char *const ot_fwview_columns[OT_FWVIEW_NCOLS] = {
    "framework", "device", "reserved", "allocated", "free inside segments", "largest free block",
    "cached (no live tensor)", "CUDA graph pools",
};

/* A framework's name in a table cell: its display name, else only letters, digits, '_', '-' and '.' of the
 * snapshot's string (a '|', '`', '<' or control character there would break the table or inject markup). */
void ot_fw_safe_name(char *out, size_t len, struct ot_str fw)
{
    const char *d = ot_fw_display_name(fw);
    if (d) {
        snprintf(out, len, "%s", d);
        return;
    }
    size_t n = 0;
    for (size_t i = 0; fw.p && i < fw.n && n < 40 && n + 1 < len; i++) {
        unsigned char c = (unsigned char)fw.p[i];
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
            c == '.')
            out[n++] = (char)c;
    }
    out[n] = 0;
    if (!n)
        snprintf(out, len, "a framework");
}

void ot_fwview_cells(const struct ot_fw_devview *d, char cells[OT_FWVIEW_NCOLS][OT_FWVIEW_CELL])
{
    char b[3][32];
    ot_fw_safe_name(cells[0], OT_FWVIEW_CELL, d->framework);
    snprintf(cells[1], OT_FWVIEW_CELL, "%" PRIu64, d->device);
    ot_fmt_bytes(cells[2], d->reserved_bytes);
    ot_fmt_bytes(cells[3], d->allocated_bytes);
    ot_fmt_bytes(cells[4], d->free_bytes);
    ot_fmt_bytes(cells[5], d->largest_free);
    snprintf(cells[6], OT_FWVIEW_CELL, "%s in %zu segment%s", ot_fmt_bytes(b[0], d->cached_bytes), d->ncached,
             d->ncached == 1 ? "" : "s");
    if (d->nprivate_pools)
        snprintf(cells[7], OT_FWVIEW_CELL, "%zu pool%s, %s reserved, %s allocated", d->nprivate_pools,
                 d->nprivate_pools == 1 ? "" : "s", ot_fmt_bytes(b[1], d->private_bytes),
                 ot_fmt_bytes(b[2], d->private_allocated_bytes));
    else
        snprintf(cells[7], OT_FWVIEW_CELL, "none");
}

const char ot_fwview_largest_note[] =
    "Largest free block: in the default pools' segments (where an ordinary request can go), not in CUDA graph pools.";

const struct ot_fw_devview *ot_fwview_failing(const struct ot_analysis *a, size_t *i)
{
    const struct ot_allocview *v = a->fw;
    const struct ot_snapshot *s = a->s;
    if (!v || !s->has_failure || s->failure.device < 0)
        return NULL;
    while (*i < v->ndevs) {
        const struct ot_fw_devview *d = &v->devs[(*i)++];
        if (d->device == (uint64_t)s->failure.device)
            return d;
    }
    return NULL;
}

void ot_fwview_request_sentence(char *out, size_t len, const struct ot_analysis *a, const struct ot_fw_devview *d)
{
    char b[3][32], fw[OT_FWVIEW_CELL];
    ot_fw_safe_name(fw, sizeof(fw), d->framework);
    snprintf(out, len, "The failed request of %s against %s's largest free block of %s, with %s free in its default "
             "pools' segments.", ot_fmt_bytes(b[0], a->s->failure.requested_bytes), fw, ot_fmt_bytes(b[1], d->largest_free),
             ot_fmt_bytes(b[2], d->default_free_bytes));
}

/* ---- markdown ---- */

bool ot_fwview_says_more(const struct ot_analysis *a, const struct ot_allocview *v)
{
    char *p = NULL;
    size_t n = 0;
    FILE *m = open_memstream(&p, &n);
    if (!m)
        return true;
    struct ot_doc d = {.f = m, .kind = OT_DOC_TEXT};
    fwview_items(&d, a, v, 1);
    const bool more = fclose(m) != 0 || n > 0;
    free(p);
    return more;
}

void ot_fwview_items_doc(struct ot_doc *d, const struct ot_analysis *a, size_t top)
{
    const struct ot_allocview *v = ot_fwview_shown(a);
    if (v)
        fwview_items(d, a, v, top);
}

void ot_fwview_markdown(FILE *f, const struct ot_analysis *a, size_t top)
{
    const struct ot_allocview *v = ot_fwview_shown(a);
    if (!v)
        return;
    fputs(v->earlier ? "\n## Allocator's view, earlier\n\n" : "\n## Allocator's view\n\n", f);
    if (v->info) {
        char tb[48];
        fputs("As the frameworks reported it: ", f);
        struct ot_doc d = {.f = f, .kind = OT_DOC_MARKDOWN};
        uint64_t ns = ot_fwview_reporters(&d, v);
        fprintf(f, ", %s, collection took %.1f ms.\n\n", ot_fmt_reltime(tb, v->info->taken_ns, a->s->meta.start_mono_ns),
                (double)ns / 1e6);
    }
    if (v->earlier) {
        char words[512];
        ot_fwview_earlier_words(words, sizeof(words), a);
        fprintf(f, "The frameworks' last report, %s.\n\n", words);
    }
    if (!v->ndevs && !ot_fwview_says_more(a, v)) {
        fputs("It reported no device memory of its own.\n\n", f);
        return;
    }
    if (v->ndevs) {
        fputc('|', f);
        for (int c = 0; c < OT_FWVIEW_NCOLS; c++)
            fprintf(f, " %s |", ot_fwview_columns[c]);
        fputs("\n|---|---:|---:|---:|---:|---:|---:|---|\n", f);
        char cells[OT_FWVIEW_NCOLS][OT_FWVIEW_CELL];
        for (size_t i = 0; i < v->ndevs; i++) {
            ot_fwview_cells(&v->devs[i], cells);
            fputc('|', f);
            for (int c = 0; c < OT_FWVIEW_NCOLS; c++)
                fprintf(f, " %s |", cells[c]);
            fputc('\n', f);
        }
        fprintf(f, "\n%s\n\n", ot_fwview_largest_note);
    }
    struct ot_doc d = {.f = f, .kind = OT_DOC_MARKDOWN};
    fwview_items(&d, a, v, top);
    char line[512];
    size_t it = 0;
    for (const struct ot_fw_devview *dv; (dv = ot_fwview_failing(a, &it));) {
        ot_fwview_request_sentence(line, sizeof(line), a, dv);
        fprintf(f, "%s\n\n", line);
    }
}
