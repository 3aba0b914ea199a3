/* snapinfo: sizes and counts of a snapshot, for the benchmarks; and the floor of a reader's event pass.
 *
 *   snapinfo FILE           one line: "snap file_bytes=... events_recorded=... events_kept=...
 *                           ring_used=... events_section=... frame_bytes=... raw_bytes=... nchunks=...
 *                           stacks=... live=..."
 *   snapinfo --decode FILE  the floor of a reader's event pass: reads FILE and zstd-decompresses every
 *                           EVENTS chunk: "result kind=decodefloor events=N ns=T", T from before the
 *                           file is read to the last chunk. Then, apart, the same plus a plain varint
 *                           decode of every event: "result kind=decodeplain events=N ns=T"
 *   snapinfo --sections FILE  one line per section: "section type=T zstd=Z stored=S raw=R"
 *   snapinfo --stacks FILE  one line per interned stack: "stack id=I nframes=N python=P flags=F"
 *                           (how the benchmarks check the depth the tracer really kept). */
#include <time.h>

#include "snapfile.h"

static double now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

int main(int argc, char **argv)
{
    int decode = argc == 3 && !strcmp(argv[1], "--decode");
    int stacks = argc == 3 && !strcmp(argv[1], "--stacks");
    int sections = argc == 3 && !strcmp(argv[1], "--sections");
    if (argc != 2 && !decode && !stacks && !sections) {
        fprintf(stderr, "usage: snapinfo [--decode|--stacks|--sections] FILE\n");
        return 2;
    }
    const char *path = argv[argc - 1];
    struct sf_file f;
    struct sf_events ev;
    if (decode) {
        double t0 = now_ns();
        if (sf_load(&f, path, 0) < 0) {
            fprintf(stderr, "snapinfo: cannot read %s\n", path);
            return 2;
        }
        uint64_t sum = sf_events(&f, &ev, 1);
        double t1 = now_ns();
        printf("result kind=decodefloor events=%llu ns=%.0f check=%llu\n", (unsigned long long)ev.nevents, t1 - t0,
               (unsigned long long)(sum & 0xffff));
        sf_free(&f);
        t0 = now_ns();
        if (sf_load(&f, path, 0) < 0)
            return 2;
        sum = sf_events(&f, &ev, 2);
        t1 = now_ns();
        printf("result kind=decodeplain events=%llu ns=%.0f check=%llu\n", (unsigned long long)ev.nevents, t1 - t0,
               (unsigned long long)(sum & 0xffff));
        sf_free(&f);
        return 0;
    }
    if (sf_load(&f, path, 1) < 0) {
        fprintf(stderr, "snapinfo: cannot read %s\n", path);
        return 2;
    }
    if (sections) {
        for (int i = 0; i < f.nsec; i++)
            printf("section type=%u zstd=%u stored=%llu raw=%llu\n", f.sec[i].type, f.sec[i].flags & 1,
                   (unsigned long long)f.sec[i].stored_len, (unsigned long long)f.sec[i].raw_len);
        sf_free(&f);
        return 0;
    }
    if (stacks) {
        const struct sf_section *st = sf_find(&f, 7);
        const uint8_t *p = st ? st->raw : NULL, *e = st ? st->raw + st->raw_len : NULL;
        for (uint64_t n = st ? sf_uv(&p, e) : 0; n && p < e; n--) {
            uint64_t id = sf_uv(&p, e), flags = sf_uv(&p, e), nf = sf_uv(&p, e), py = 0;
            for (uint64_t i = 0; i < nf; i++)
                py += sf_uv(&p, e) & 1;
            printf("stack id=%llu nframes=%llu python=%llu flags=%llu\n", (unsigned long long)id,
                   (unsigned long long)nf, (unsigned long long)py, (unsigned long long)flags);
        }
        sf_free(&f);
        return 0;
    }
    struct sf_meta m = {0};
    sf_meta(&f, &m);
    sf_events(&f, &ev, 0);
    const struct sf_section *es = sf_find(&f, 10);
    printf("snap file_bytes=%zu events_recorded=%llu events_kept=%llu ring_used=%llu events_section=%llu "
           "frame_bytes=%llu raw_bytes=%llu nchunks=%llu chunk_events=%llu stacks=%llu live=%llu\n",
           f.len, (unsigned long long)m.events_recorded, (unsigned long long)m.events_kept,
           (unsigned long long)m.ring_used, (unsigned long long)(es ? es->stored_len : 0),
           (unsigned long long)ev.frame_bytes, (unsigned long long)ev.raw_bytes, (unsigned long long)ev.nchunks,
           (unsigned long long)ev.nevents, (unsigned long long)sf_count(&f, 7),
           (unsigned long long)(sf_find(&f, 16) ? sf_count(&f, 16) : sf_count(&f, 8))); /* LIVE_SEQ or LIVE */
    sf_free(&f);
    return 0;
}
