/* What the two files of the hostile test program (hostile.c, hostile_proc.c) share. */
#ifndef HOSTILE_H
#define HOSTILE_H

#include <sys/types.h>

#define MiB (1024ull * 1024)

void device_init(void);
void sleep_ms(long ms);
double now_s(void);

int mode_fork(long n, int allocate, int walk_ms, const char *plugin, int realloc_ms);
int mode_sigign(int argc, char **argv);
int mode_unshare(void);
int mode_sigpending(long pre);
int mode_writerace(const char *how);
int mode_sigexit(int wait);
int mode_termchild(void);
int mode_segv(void);
int mode_exec(void);

#endif
