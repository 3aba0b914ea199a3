/* The document layer for markdown and HTML (doc.h). */
#include "render/doc.h"

#include <stdarg.h>

#include "render/html.h"

/* Text outside code spans: the ASCII punctuation that markdown or HTML could act on inside a line
 * (emphasis, code, links, tags, table cells, strikethrough) is backslash-escaped, control characters and invalid UTF-8 become
 * \xNN (shown literally, the backslash escaped), so no snapshot string can open a link, an HTML tag
 * or a table cell. max_bytes > 0 cuts the string with "...". */
static void md_text_ascii(FILE *f, unsigned c, void *ctx)
{
    (void)ctx;
    if (c < 0x20 || c == 0x7f)
        fprintf(f, "\\\\x%02x", c);
    else if (c == '&')
        fputs("&amp;", f);
    else if (strchr("\\`*_{}[]<>|~", (int)c))
        fprintf(f, "\\%c", (int)c);
    else
        putc_unlocked((int)c, f);
}

void ot_md_text(FILE *f, struct ot_str s, size_t max_bytes)
{
    if (ot_fput_markup(f, s, max_bytes, "\\\\x%02x", md_text_ascii, NULL))
        fputs("...", f);
}

/* A code span. Its content is literal in markdown, so only what would end it matters: a backtick
 * becomes ', a '|' is escaped in table cells (GFM splits cells before it reads code spans), control
 * characters and invalid UTF-8 become \xNN. */
static void md_code_ascii(FILE *f, unsigned c, void *ctx)
{
    bool in_table = *(const bool *)ctx;
    if (c < 0x20 || c == 0x7f)
        fprintf(f, "\\x%02x", c);
    else if (c == '`')
        putc_unlocked('\'', f);
    else if (c == '|' && in_table)
        fputs("\\|", f);
    else
        putc_unlocked((int)c, f);
}

void ot_md_code(FILE *f, struct ot_str s, size_t max_bytes, bool in_table)
{
    const unsigned char *p = (const unsigned char *)s.p;
    size_t n = max_bytes && s.n > max_bytes ? max_bytes : s.n;
    putc_unlocked('`', f);
    if (n == 0 || p[0] == ' ')
        putc_unlocked(' ', f); /* a span of spaces or starting with one loses a space: pad */
    if (ot_fput_markup(f, s, max_bytes, "\\x%02x", md_code_ascii, &in_table))
        fputs("...", f);
    if (n == 0 || p[n - 1] == ' ')
        putc_unlocked(' ', f);
    putc_unlocked('`', f);
}

void ot_doc_text(struct ot_doc *d, struct ot_str s, size_t max_bytes)
{
    if (d->kind == OT_DOC_TEXT)
        ot_fput_safe_max(d->f, s, max_bytes);
    else if (d->kind == OT_DOC_HTML)
        h_text(d->f, s, max_bytes);
    else
        ot_md_text(d->f, s, max_bytes);
}

void ot_doc_code(struct ot_doc *d, struct ot_str s, size_t max_bytes)
{
    if (d->kind == OT_DOC_TEXT) {
        ot_fput_safe_max(d->f, s, max_bytes);
        return;
    }
    if (d->kind == OT_DOC_MARKDOWN) {
        ot_md_code(d->f, s, max_bytes, d->in_table);
        return;
    }
    fputs("<code>", d->f);
    h_text(d->f, s, max_bytes);
    fputs("</code>", d->f);
}

void ot_doc_printf(struct ot_doc *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(d->f, fmt, ap);
    va_end(ap);
}

/* Each piece as text, markdown and HTML. */
static void put3(struct ot_doc *d, const char *text, const char *md, const char *html)
{
    fputs(d->kind == OT_DOC_HTML ? html : d->kind == OT_DOC_MARKDOWN ? md : text, d->f);
}

static void put2(struct ot_doc *d, const char *md, const char *html)
{
    put3(d, md, md, html);
}

void ot_doc_heading(struct ot_doc *d, int level, const char *plain)
{
    if (d->kind == OT_DOC_HTML)
        fprintf(d->f, "<h%d>%s</h%d>\n", level, plain, level);
    else if (d->kind == OT_DOC_TEXT)
        fprintf(d->f, "%s\n", plain);
    else
        fprintf(d->f, "%.*s %s\n\n", level, "######", plain);
}

void ot_doc_card_heading(struct ot_doc *d, const char *title_plain, const char *detail_plain)
{
    if (d->kind == OT_DOC_HTML)
        fprintf(d->f, detail_plain ? "<h2>%s<small>%s</small></h2>\n" : "<h2>%s</h2>\n", title_plain, detail_plain);
    else if (d->kind == OT_DOC_MARKDOWN)
        fprintf(d->f, detail_plain ? "### %s, %s\n\n" : "### %s\n\n", title_plain, detail_plain);
    else
        fprintf(d->f, detail_plain ? "%s, %s\n" : "%s\n", title_plain, detail_plain);
}

void ot_doc_note(struct ot_doc *d, const char *plain)
{
    fprintf(d->f, d->kind == OT_DOC_HTML ? "<p class=\"note warn\">%s</p>\n" : d->kind == OT_DOC_MARKDOWN ? "(%s)\n\n" : "  (%s)\n",
            plain);
}

void ot_doc_para(struct ot_doc *d)
{
    put2(d, "", "<p>");
}

void ot_doc_para_end(struct ot_doc *d)
{
    put3(d, "\n", "\n\n", "</p>\n");
}

void ot_doc_bold(struct ot_doc *d, const char *plain)
{
    fprintf(d->f, d->kind == OT_DOC_HTML ? "<b>%s</b>" : d->kind == OT_DOC_MARKDOWN ? "**%s**" : "%s", plain);
}

void ot_doc_item(struct ot_doc *d)
{
    if (d->kind == OT_DOC_HTML && !d->in_list)
        fputs("<ul class=\"why\">", d->f);
    d->in_list = true;
    put3(d, "  ", "- ", "<li>");
}

void ot_doc_item_end(struct ot_doc *d)
{
    put2(d, "\n", "</li>\n");
}

void ot_doc_list_end(struct ot_doc *d)
{
    if (d->in_list)
        put3(d, "", "\n", "</ul>\n");
    d->in_list = false;
}

void ot_doc_rule(struct ot_doc *d)
{
    put3(d, "\n", "---\n\n", "<hr>\n");
}

void ot_doc_swatch(struct ot_doc *d, const char *cls)
{
    if (d->kind == OT_DOC_HTML)
        fprintf(d->f, "<span class=\"sw %s\"></span>", cls);
}

void ot_doc_table(struct ot_doc *d, const char *const *heads, const char *aligns)
{
    size_t n = strlen(aligns);
    d->aligns = aligns;
    if (d->kind == OT_DOC_HTML) {
        if (d->table_class)
            fprintf(d->f, "<table class=\"%s\"><thead><tr>", d->table_class);
        else
            fputs("<table><thead><tr>", d->f);
        for (size_t i = 0; i < n; i++)
            fprintf(d->f, "<th%s>%s</th>", aligns[i] == 'r' ? " class=\"num\"" : "", heads[i]);
        fputs("</tr></thead><tbody>\n", d->f);
    } else {
        fputc('|', d->f);
        for (size_t i = 0; i < n; i++)
            fprintf(d->f, " %s |", heads[i]);
        fputs("\n|", d->f);
        for (size_t i = 0; i < n; i++)
            fputs(aligns[i] == 'r' ? "--:|" : "---|", d->f);
        fputc('\n', d->f);
    }
    d->in_table = true;
}

void ot_doc_row(struct ot_doc *d)
{
    d->col = 0;
    put2(d, "|", "<tr>");
}

void ot_doc_cell(struct ot_doc *d)
{
    if (d->kind == OT_DOC_HTML)
        fputs(d->aligns[d->col] == 'r' ? "<td class=\"num\">" : "<td>", d->f);
    else
        fputc(' ', d->f);
}

void ot_doc_cell_end(struct ot_doc *d)
{
    if (d->aligns[d->col + 1])
        d->col++;
    put2(d, " |", "</td>");
}

void ot_doc_row_end(struct ot_doc *d)
{
    put2(d, "\n", "</tr>\n");
}

void ot_doc_table_end(struct ot_doc *d)
{
    put2(d, "\n", "</tbody></table>\n");
    d->in_table = false;
    d->col = 0;
}

void ot_doc_page(struct ot_doc *d, const char *title_plain)
{
    if (d->kind != OT_DOC_HTML) {
        fprintf(d->f, d->kind == OT_DOC_MARKDOWN ? "## %s\n\n" : "%s\n", title_plain);
        return;
    }
    fprintf(d->f, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>%s</title>\n<style>\n%s"
            "</style>\n</head>\n<body>\n<header><h1>%s</h1></header>\n<main><section class=\"card\">\n", title_plain, h_css,
            title_plain);
}

void ot_doc_page_end(struct ot_doc *d)
{
    if (d->kind == OT_DOC_HTML)
        fputs("</section></main>\n</body>\n</html>\n", d->f);
}
