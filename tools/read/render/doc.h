/* Text, markdown and HTML written by the same code: paragraphs, bold, list items, headings, code spans and
 * tables, with every untrusted string escaped for the document's kind. The directory view and --diff
 * (modes/) lay out their prose once through this; the markdown report uses its escaping. In text, bold and
 * code are plain, a paragraph is one line, a list item a line indented by two spaces. */
#ifndef OT_READ_DOC_H
#define OT_READ_DOC_H

#include <stdbool.h>
#include <stdio.h>

#include "model/snapshot.h"

enum ot_doc_kind { OT_DOC_TEXT, OT_DOC_MARKDOWN, OT_DOC_HTML };

struct ot_doc {
    FILE *f;
    enum ot_doc_kind kind;
    bool in_table, in_list;
    const char *aligns; /* the open table's column alignments: 'l' or 'r' per column */
    const char *table_class; /* HTML: the next table's class, when set */
    size_t col;
};

/* Markdown text outside code spans, and code spans (in_table: '|' escaped for GFM tables). max_bytes > 0
 * cuts with "...". */
void ot_md_text(FILE *f, struct ot_str s, size_t max_bytes);
void ot_md_code(FILE *f, struct ot_str s, size_t max_bytes, bool in_table);

/* Untrusted text, and a code span. */
void ot_doc_text(struct ot_doc *d, struct ot_str s, size_t max_bytes);
void ot_doc_code(struct ot_doc *d, struct ot_str s, size_t max_bytes);
/* Trusted markup-free text (numbers, fixed words), printf-style. */
void ot_doc_printf(struct ot_doc *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ot_doc_heading(struct ot_doc *d, int level, const char *plain);
/* A card's heading with its detail in small type (markdown: "### TITLE, DETAIL"); detail may be NULL. */
void ot_doc_card_heading(struct ot_doc *d, const char *title_plain, const char *detail_plain);
void ot_doc_note(struct ot_doc *d, const char *plain); /* a warning note under a heading */
void ot_doc_para(struct ot_doc *d);     /* opens a paragraph */
void ot_doc_para_end(struct ot_doc *d);
void ot_doc_bold(struct ot_doc *d, const char *plain);
void ot_doc_item(struct ot_doc *d);     /* opens a list item (a list of one level, closed by ot_doc_list_end) */
void ot_doc_item_end(struct ot_doc *d);
void ot_doc_list_end(struct ot_doc *d);
void ot_doc_rule(struct ot_doc *d);
/* HTML: a colour swatch of the given class; nothing in text and markdown. */
void ot_doc_swatch(struct ot_doc *d, const char *cls);

/* Tables are for markdown and HTML only. A table: head cells (plain), aligns one 'l' or 'r' per column; cells are opened and closed one by one. */
void ot_doc_table(struct ot_doc *d, const char *const *heads, const char *aligns);
void ot_doc_row(struct ot_doc *d);
void ot_doc_cell(struct ot_doc *d);
void ot_doc_cell_end(struct ot_doc *d);
void ot_doc_row_end(struct ot_doc *d);
void ot_doc_table_end(struct ot_doc *d);

/* An HTML page of its own (the report's CSS), for views with no snapshot report around them; markdown
 * writes only the title as a heading. */
void ot_doc_page(struct ot_doc *d, const char *title_plain);
void ot_doc_page_end(struct ot_doc *d);

#endif
