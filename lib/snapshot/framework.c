/* What the frameworks' allocators hold, as their Python companion last reported it, and the driver-level
 * OOM snapshots that precede a framework's own OOM. Neither is parsed here: the payload is the
 * companion's (docs/FORMAT.md, FRAMEWORK), the reader checks it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "snapshot/framework.h"

/* A payload past this is a companion bug or a hostile caller, not an allocator's state. */
#define FW_MAX_PAYLOAD ((size_t)256 << 20)
/* PyTorch retries and cuDNN probes leave tens of driver OOMs per framework OOM; the last ones matter. */
#define MAX_PROBES 256

struct probe {
    char name[160];
    uint64_t failure_seq, requested;
    int device;
};

static pthread_mutex_t fw_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *fw_payload;
static size_t fw_len;
static struct probe probes[MAX_PROBES];
static uint64_t nprobes; /* noted since the last take; the last MAX_PROBES are kept */
static int warned_big;

int ot_framework_keep(const void *payload, size_t len)
{
    if (!payload || !len)
        return -1;
    if (len > FW_MAX_PAYLOAD) {
        if (!__atomic_exchange_n(&warned_big, 1, __ATOMIC_RELAXED))
            ot_log("framework state of %zu bytes refused (at most %zu); snapshots keep the previous one", len,
                   FW_MAX_PAYLOAD);
        return -1;
    }
    uint8_t *copy = malloc(len);
    if (!copy) {
        ot_log("no memory to keep %zu bytes of framework state; snapshots keep the previous one", len);
        return -1;
    }
    memcpy(copy, payload, len);
    pthread_mutex_lock(&fw_lock);
    uint8_t *old = fw_payload;
    fw_payload = copy;
    fw_len = len;
    pthread_mutex_unlock(&fw_lock);
    free(old);
    return 0;
}

int ot_framework_serialize(struct ot_buf *b)
{
    pthread_mutex_lock(&fw_lock);
    int have = fw_payload != NULL;
    if (have)
        ot_buf_put(b, fw_payload, fw_len);
    pthread_mutex_unlock(&fw_lock);
    return have;
}

void ot_probe_note(const char *path, uint64_t failure_seq, uint64_t requested, int device)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    pthread_mutex_lock(&fw_lock);
    struct probe *p = &probes[nprobes++ % MAX_PROBES];
    snprintf(p->name, sizeof p->name, "%s", base);
    p->failure_seq = failure_seq;
    p->requested = requested;
    p->device = device;
    pthread_mutex_unlock(&fw_lock);
}

void ot_probes_take(struct ot_buf *b)
{
    pthread_mutex_lock(&fw_lock);
    uint64_t n = nprobes < MAX_PROBES ? nprobes : MAX_PROBES;
    ot_buf_uv(b, n);
    for (uint64_t i = nprobes - n; i < nprobes; i++) {
        const struct probe *p = &probes[i % MAX_PROBES];
        ot_buf_cstr(b, p->name);
        ot_buf_uv(b, p->failure_seq);
        ot_buf_uv(b, p->requested);
        ot_buf_uv(b, p->device < 0 ? 0 : (uint64_t)p->device);
    }
    nprobes = 0;
    pthread_mutex_unlock(&fw_lock);
}

/* A forked child: the parent's lock may have been held, and the parent's probes and frameworks' view are not
 * the child's (a CUDA context does not survive fork: what the parent's allocators held is not the child's). */
void ot_framework_reset_child(void)
{
    pthread_mutex_init(&fw_lock, NULL);
    nprobes = 0;
    free(fw_payload);
    fw_payload = NULL;
    fw_len = 0;
}
