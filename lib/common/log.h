/* One bounded line on stderr, never allocating (log.c). */
#ifndef OOMTRACE_COMMON_LOG_H
#define OOMTRACE_COMMON_LOG_H

void ot_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void ot_log_init(void); /* remembers which file fd 2 is at start */
#endif
