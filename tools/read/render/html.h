/* Inside the HTML report (report_html.c, html_timeline.c, html_assets.c): the page's state, its
 * escaping, and its fixed CSS and script. Not for use outside render/. */
#ifndef OT_READ_HTML_H
#define OT_READ_HTML_H

#include <stdio.h>

#include "render/sitelabel.h"
#include "analyze/timeline.h"

#define H_POINTS 2000      /* timeline points at most (per series) */
#define H_NAME_MAX 160     /* bytes of one frame name in a label */
#define H_MARKERS_TIMELINE 1024
#define H_MARKERS_LISTED 50
#define H_FRAMES_MAX 256   /* frames shown per stack */

struct hx {
    FILE *f;
    const struct ot_analysis *a;
    const struct ot_snapshot *s;
    const struct ot_report_opts *o;
    struct ot_timeline tl;
    bool has_tl;
    char **series_names;
    struct ot_sb sb;
};

/* Untrusted bytes as HTML text or attribute value: &<>"' escaped; valid UTF-8 passes; control
 * characters and invalid bytes shown as \xNN. max_bytes > 0 cuts with "...". */
void h_text(FILE *f, struct ot_str s, size_t max_bytes);
void h_cstr(FILE *f, const char *s);

/* The timeline card: its notes, and the JSON the script draws it from. */
void h_timeline_section(struct hx *h);

/* The cards from analyze/'s summaries (html_views.c): What held the memory, a list of statements (Why,
 * What to try; id is the section's element id), the allocator's view. Each writes nothing without data. */
struct ot_why;
void h_breakdown_section(struct hx *h);
void h_statements(struct hx *h, const struct ot_why *w, const char *id, const char *title);
void h_allocator_section(struct hx *h);
/* Under the failed request of a framework's own out-of-memory: who refused it, its message, the probes before it. */
void h_fw_failure(struct hx *h);

/* Series colours: the top sites, then "other" (last). Shared by the CSS and the script. */
extern const char *const h_palette[OT_TL_TOP + 1];
/* Breakdown category colours, by enum ot_bd_row (classes .bdN). */
extern const char *const h_bd_palette[];
extern const char h_css[];
extern const char h_script[];

#endif
