/* snapgen: writes synthetic oomtrace snapshots that follow docs/FORMAT.md, so the reader can be tested
 * (and fuzzed, and benchmarked) without the tracer or a GPU.
 *
 * The run is simulated: persistent allocations (still live at the end), steps of temporaries that are
 * allocated and freed again, one large step (the peak), markers, and for --trigger oom a final failed
 * allocation. Every number in the snapshot comes from that simulation, so the sections agree with one
 * another: LIVE sums to DEVICES.tracked_bytes, PEAK to the peak, the ring to events_kept.
 *
 * This file holds the options and the order of the work; snapgen.h names the parts. The program is every
 * C file of tests/snapgen but bombs.c, a program of its own (README: how to build it alone).
 *
 * The output is a function of the options (the seed included), except with --real-stacks, whose
 * addresses are this process's own and change with ASLR. */
#include "snapgen.h"

#include <getopt.h>

struct cfg cfg = {
    .seed = 1,
    .events = 10000,
    .live = 100,
    .stacks = 50,
    .devices = 1,
    .chunk = 8192,
    .markers_every = 1000,
    .trigger = OT_TRIGGER_OOM,
    .compress = true,
    .probes = 3,
};

static const char usage[] =
    "Usage: snapgen [OPTIONS] -o FILE\n"
    "Writes a synthetic oomtrace snapshot (docs/FORMAT.md).\n"
    "  --seed N            PRNG seed (default 1); same options and seed give the same bytes\n"
    "  --trigger T         oom (default), exit, signal, api, flush or framework-oom (a framework refused\n"
    "                      its own request: the fatal snapshot, with the probes before it)\n"
    "  --events N          events recorded (default 10000)\n"
    "  --live N            allocations live at the snapshot (default 100)\n"
    "  --stacks N          distinct stacks (default 50)\n"
    "  --devices N         devices, 1 to 16 (default 1)\n"
    "  --chunk N           events per ring chunk (default 8192)\n"
    "  --drop-chunks N     oldest ring chunks dropped (default 0)\n"
    "  --markers-every N   a marker every N events (default 1000, 0 none)\n"
    "  --incomplete        leave out the COMPLETE flag (a crash-surviving flush)\n"
    "  --no-compress       write every section uncompressed\n"
    "  --real-stacks       this program's own backtraces, modules and dladdr symbols (for libdw tests)\n"
    "  --future            a later minor version: an unknown section and appended fields\n"
    "  --hostile-strings   control characters, quotes and invalid UTF-8 in strings\n"
    "  --seq-order         the live set as LIVE_SEQ and peaks as PEAK_REF, as the tracer writes them since\n"
    "                      format 1.1 (the corrupt modes from peak-ref-count on imply it)\n"
    "  --framework LIST    the frameworks' view the companion writes: torch, jax, cupy, comma-separated\n"
    "                      (torch: segments split into allocated and free blocks, a graph pool, an\n"
    "                      expandable segment over the VMM mappings, roles and steps; jax: preallocated\n"
    "                      pool and live arrays; cupy: a pool caching freed memory)\n"
    "  --fraction PCT      torch's per-process memory fraction, percent (its framework OOM hits the limit)\n"
    "  --jax-device N      JAX's counters and arrays are device N's (default 0; with --devices above N)\n"
    "  --no-model          torch's roles record empty: the companion's scan found no model on the GPU\n"
    "  --fw-earlier        the frameworks' view (implies --framework torch unless given) is the one the companion\n"
    "                      took at an earlier framework OOM, 60% into the run, with that failure's message\n"
    "  --probes N          driver-level OOM snapshots listed before a framework OOM (default 3)\n"
    "  --no-probes         a framework OOM without that list\n"
    "  --borrowed          every fifth stack borrowed its Python frames from a waiting thread (BORROWED)\n"
    "  --ctx-ends          every fifth step (up to 8) ends with its context's end, one event, instead of its\n"
    "                      frees (context_end events and CTX_FREED)\n"
    "  --corrupt MODE      damage the file (the fw-* and probes-* modes imply --framework); MODE is one of:\n"
    "                      ";

enum { O_SEED = 256, O_TRIGGER, O_EVENTS, O_LIVE, O_STACKS, O_DEVICES, O_CHUNK, O_DROP, O_MARKERS,
       O_INCOMPLETE, O_NOCOMPRESS, O_REAL, O_FUTURE, O_HOSTILE, O_CORRUPT, O_SEQ_ORDER, O_FRAMEWORK, O_FRACTION,
       O_PROBES, O_NO_PROBES, O_BORROWED, O_CTX_ENDS, O_NO_MODEL, O_FW_EARLIER, O_JAX_DEVICE, O_HELP };

static uint64_t num(const char *opt, const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (!*s || *end || s[0] == '-') {
        fprintf(stderr, "snapgen: %s needs a number, got '%s'\n", opt, s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    static const struct option lo[] = {
        {"seed", 1, 0, O_SEED},          {"trigger", 1, 0, O_TRIGGER},     {"events", 1, 0, O_EVENTS},
        {"live", 1, 0, O_LIVE},          {"stacks", 1, 0, O_STACKS},       {"devices", 1, 0, O_DEVICES},
        {"chunk", 1, 0, O_CHUNK},        {"drop-chunks", 1, 0, O_DROP},    {"markers-every", 1, 0, O_MARKERS},
        {"incomplete", 0, 0, O_INCOMPLETE}, {"no-compress", 0, 0, O_NOCOMPRESS}, {"real-stacks", 0, 0, O_REAL},
        {"future", 0, 0, O_FUTURE},      {"hostile-strings", 0, 0, O_HOSTILE}, {"corrupt", 1, 0, O_CORRUPT},
        {"seq-order", 0, 0, O_SEQ_ORDER}, {"help", 0, 0, O_HELP},          {"framework", 1, 0, O_FRAMEWORK},
        {"fraction", 1, 0, O_FRACTION},  {"probes", 1, 0, O_PROBES},         {"no-probes", 0, 0, O_NO_PROBES},
        {"borrowed", 0, 0, O_BORROWED},
        {"ctx-ends", 0, 0, O_CTX_ENDS},  {"no-model", 0, 0, O_NO_MODEL},
        {"fw-earlier", 0, 0, O_FW_EARLIER}, {"jax-device", 1, 0, O_JAX_DEVICE},
        {0, 0, 0, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "o:", lo, NULL)) != -1) {
        switch (c) {
        case O_SEED: cfg.seed = num("--seed", optarg); break;
        case O_EVENTS: cfg.events = num("--events", optarg); break;
        case O_LIVE: cfg.live = num("--live", optarg); break;
        case O_STACKS: cfg.stacks = num("--stacks", optarg); break;
        case O_DEVICES: cfg.devices = num("--devices", optarg); break;
        case O_CHUNK: cfg.chunk = num("--chunk", optarg); break;
        case O_DROP: cfg.drop_chunks = num("--drop-chunks", optarg); break;
        case O_MARKERS: cfg.markers_every = num("--markers-every", optarg); break;
        case O_INCOMPLETE: cfg.incomplete = true; break;
        case O_NOCOMPRESS: cfg.compress = false; break;
        case O_REAL: cfg.real_stacks = true; break;
        case O_FUTURE: cfg.future = true; break;
        case O_HOSTILE: cfg.hostile = true; break;
        case O_SEQ_ORDER: cfg.seq_order = true; break;
        case O_FRACTION: cfg.fraction_pct = num("--fraction", optarg); break;
        case O_JAX_DEVICE: cfg.jax_device = num("--jax-device", optarg); break;
        case O_PROBES: cfg.probes = num("--probes", optarg); break;
        case O_NO_PROBES: cfg.no_probes = true; break;
        case O_BORROWED: cfg.borrowed = true; break;
        case O_CTX_ENDS: cfg.ctx_ends = true; break;
        case O_NO_MODEL: cfg.no_model = true; break;
        case O_FW_EARLIER: cfg.fw_earlier = true; break;
        case O_FRAMEWORK: {
            char *list = strdup(optarg), *save = NULL;
            for (char *w = strtok_r(list, ",", &save); w; w = strtok_r(NULL, ",", &save)) {
                unsigned bit = !strcmp(w, "torch") ? FW_TORCH : !strcmp(w, "jax") ? FW_JAX : !strcmp(w, "cupy") ? FW_CUPY : 0;
                if (!bit) {
                    fprintf(stderr, "snapgen: unknown framework '%s' (torch, jax, cupy)\n", w);
                    return 2;
                }
                cfg.frameworks |= bit;
            }
            free(list);
            break;
        }
        case O_TRIGGER: {
            cfg.trigger = 0;
            for (int i = 1; ot_trigger_name((uint64_t)i); i++)
                if (!strcmp(optarg, ot_trigger_name((uint64_t)i)))
                    cfg.trigger = i;
            if (!cfg.trigger) {
                fprintf(stderr, "snapgen: unknown trigger '%s'\n", optarg);
                return 2;
            }
            break;
        }
        case O_CORRUPT: {
            size_t i;
            for (i = 0; i < C_COUNT && strcmp(optarg, corrupt_names[i]); i++)
                ;
            if (i == C_COUNT) {
                fprintf(stderr, "snapgen: unknown corruption '%s' (see --help)\n", optarg);
                return 2;
            }
            cfg.corrupt = (enum corrupt)i;
            cfg.seq_order |= cfg.corrupt >= C_PEAK_REF_COUNT && cfg.corrupt < C_FW_LAYOUT;
            break;
        }
        case 'o': cfg.out = optarg; break;
        case O_HELP:
            fputs(usage, stdout);
            for (size_t i = 1; i < C_COUNT; i++)
                printf("%s%s", corrupt_names[i], i + 1 < C_COUNT ? ", " : "\n");
            return 0;
        default:
            fputs("snapgen: see --help\n", stderr);
            return 2;
        }
    }
    if (!cfg.out || optind != argc) {
        fputs("snapgen: -o FILE is required (see --help)\n", stderr);
        return 2;
    }
    if (cfg.devices < 1 || cfg.devices > MAX_DEV || cfg.stacks < 1 || cfg.chunk < 1) {
        fputs("snapgen: --devices must be 1..16, --stacks and --chunk at least 1\n", stderr);
        return 2;
    }
    if (cfg.corrupt >= C_BORROWED_STACK && cfg.corrupt <= C_BORROWED_COUNT)
        cfg.borrowed = true;
    if (cfg.corrupt >= C_CTX_ORDER && cfg.corrupt <= C_CTX_SIZE)
        cfg.ctx_ends = true;
    if (cfg.fw_earlier && !cfg.frameworks)
        cfg.frameworks = FW_TORCH;
    if (cfg.jax_device && cfg.jax_device >= cfg.devices) {
        fputs("snapgen: --jax-device needs --devices above it\n", stderr);
        return 2;
    }
    if (cfg.fraction_pct > 100) {
        fputs("snapgen: --fraction is a percent, 1..100\n", stderr);
        return 2;
    }
    if (cfg.corrupt >= C_FW_LAYOUT) {
        cfg.frameworks |= cfg.frameworks ? 0 : FW_TORCH;
        cfg.frameworks |= cfg.corrupt == C_FW_ARRAYS_SHORT ? FW_JAX : 0;
        if (cfg.corrupt == C_FW_ERROR_SHORT || cfg.corrupt == C_PROBES_COUNT)
            cfg.trigger = OT_TRIGGER_FRAMEWORK_OOM;
    }
    if (cfg.trigger == OT_TRIGGER_FRAMEWORK_OOM && !cfg.frameworks)
        cfg.frameworks = FW_TORCH;
    rng = cfg.seed;
    make_pyframes();
    if (cfg.real_stacks)
        make_real_stacks();
    else
        make_fake_stacks();
    simulate();
    write_file();
    corrupt_file();

    FILE *f = strcmp(cfg.out, "-") ? fopen(cfg.out, "wb") : stdout;
    if (!f || fwrite(snap.p, 1, snap.n, f) != snap.n || fflush(f) != 0) {
        perror(cfg.out);
        return 1;
    }
    if (f != stdout)
        fclose(f);
    return 0;
}
