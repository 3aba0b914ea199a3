/* Short names for frames and call sites, shared by the folded, markdown, HTML and memviz reports, and a
 * small growable string.
 *
 * Names are raw snapshot bytes (possibly invalid UTF-8, control characters, ';' or '|'): each report
 * escapes them for its own syntax when it writes them. */
#ifndef OT_READ_SITELABEL_H
#define OT_READ_SITELABEL_H

#include "analyze/analysis.h"
#include "render/report.h"

/* A growable byte string. On out of memory it keeps what fits and sets oom; never fails loudly. */
struct ot_sb {
    char *p;
    size_t n, cap;
    bool oom;
};
void ot_sb_put(struct ot_sb *b, const char *p, size_t n);
void ot_sb_str(struct ot_sb *b, struct ot_str s); /* unknown (p == NULL) writes nothing */
void ot_sb_cstr(struct ot_sb *b, const char *s);
void ot_sb_printf(struct ot_sb *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ot_sb_reset(struct ot_sb *b);
void ot_sb_free(struct ot_sb *b);
struct ot_str ot_sb_view(const struct ot_sb *b);

/* The last path component. */
struct ot_str ot_lbl_basename(struct ot_str path);

/* One frame as a flame graph names it: Python "function (file:line)" (the file from its package root,
 * analyze/userline's ot_package_path),
 * native "function" when known, else "module+0xOFF" (module's base name), else "0xADDR". */
void ot_lbl_frame(struct ot_sb *b, const struct ot_frame *f);

/* Labels for sites v[0..n): the innermost meaningful frame of each (the innermost Python frame, else
 * the innermost native frame that is not plumbing, with its "(file:line)" when debug info gave them; C++
 * parameter lists dropped, files spelled as in every report: analyze/userline's ot_site_file). Where sites share that frame, each adds the first outer
 * frame that tells it from the others: "f (a.py:1) ← g (b.py:2)", or "f ← … ← g" past frames
 * they share (arrows and ellipsis in UTF-8); "(stack N)" when nothing does. Returns n malloc'd strings
 * (free with ot_strv_free), or NULL when out of memory. max_bytes caps one frame's name ("..." past it). */
char **ot_lbl_sites(const struct ot_analysis *a, const struct ot_site *v, size_t n, size_t max_bytes);

/* The failed request's label, told apart from the site rows it would read as (the failing call and the
 * peak's largest site both "grab (my_prog.c:7)", from two lines of main): labelled with the top `top` sites
 * of the peak and of the failure, so it names the caller where they part. malloc'd; NULL when out of memory. */
/* Does the label already end with " (stack N)" (labels that read alike add it)? Then a caller that names the
 * stack after it would say it twice. */
bool ot_lbl_ends_with_stack(const char *label, uint64_t stack_id);
char *ot_lbl_failure(const struct ot_analysis *a, uint64_t stack_id, size_t top, size_t max_bytes);

#endif
