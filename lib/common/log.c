/* Messages: one line on stderr with write(2), formatted into a fixed buffer, so printing never
 * allocates, never touches stdio state the program owns, and never recurses into the hooks. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/log.h"
#include "common/nosig.h"

/* The stderr the process had at start. A program may close fd 2 and open its own data file there; our
 * line would then land inside its records. So a line is written only while fd 2 is that same file, or a
 * terminal, pipe or socket (where a line of text is what anyone expects); otherwise it is dropped. */
static dev_t err_dev;
static ino_t err_ino;
static int err_known;

void ot_log_init(void)
{
    struct stat st;
    if (fstat(STDERR_FILENO, &st) == 0) {
        err_dev = st.st_dev;
        err_ino = st.st_ino;
        err_known = 1;
    }
}

static int stderr_is_ours(void)
{
    struct stat st;
    if (fstat(STDERR_FILENO, &st) != 0)
        return 0;
    if (S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))
        return 1;
    return err_known && st.st_dev == err_dev && st.st_ino == err_ino;
}

void ot_log(const char *fmt, ...)
{
    char line[512];
    int saved = errno;
    if (!stderr_is_ours()) {
        errno = saved;
        return;
    }
    int n = snprintf(line, sizeof line, "oomtrace: ");
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2;
    line[len++] = '\n';
    /* A reader that has gone (`2>&1 | head`) or a file size limit ends the line, never the program. */
    struct ot_nosig q;
    ot_nosig_begin(&q);
    for (size_t off = 0; off < len;) {
        ssize_t w = write(STDERR_FILENO, line + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            ot_nosig_saw(&q, errno);
        if (w <= 0)
            break;
        off += (size_t)w;
    }
    ot_nosig_end(&q);
    errno = saved;
}
