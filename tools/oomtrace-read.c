/* oomtrace-read: turns an oomtrace snapshot into a report.
 *
 * Exit status: 0 report written; 1 a CI gate failed (reserved); 2 bad input, bad usage or an I/O
 * error, with exactly one line on stderr. The whole file is parsed and checked (ring included) before
 * the first byte of output, so a damaged snapshot never yields half a report. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze/analysis.h"
#include "analyze/why.h"
#include "render/report.h"
#include "symbols/resolve.h"
#include "model/snapshot.h"
#include "symbols/symbolize.h"
#include "modes/run.h"

#define OT_READ_VERSION "0.1.0"
#define OT_EXIT_OK 0
#define OT_EXIT_GATE 1
#define OT_EXIT_BAD 2

static const char usage_text[] =
    "Usage: oomtrace-read [OPTIONS] SNAPSHOT\n"
    "       oomtrace-read [OPTIONS] DIRECTORY        (a job's snapshots, merged: see Directories)\n"
    "       oomtrace-read [OPTIONS] --diff BASE NEW  (the change in peak bytes per call site)\n"
    "Reads an oomtrace snapshot (a .oomt file written by liboomtrace.so; \"-\" reads standard input)\n"
    "and reports who held device memory when it ran out.\n"
    "\n"
    "Options:\n"
    "  --top N          call sites per table in the text report (default 10). In JSON every site is\n"
    "                   listed unless --top is given.\n"
    "  --at MOMENT      which moment the text site tables describe: peak, failure or live.\n"
    "                   Default: the peak and, for an out-of-memory snapshot, the failure (else the\n"
    "                   live set at the snapshot). failure on a snapshot without one shows live.\n"
    "  --frames N       frames shown per stack in text (default 8; inlined frames count). JSON has all.\n"
    "  --format FORMAT  text (default), json (schema oomtrace-report/1, see docs/JSON.md), folded,\n"
    "                   markdown, html or memviz (see Formats below and docs/FORMATS.md).\n"
    "  -o, --output FILE  write the report to FILE instead of standard output (- is standard output).\n"
    "                   A FILE that is the snapshot being read, or any snapshot, is refused (the report\n"
    "                   would destroy it).\n"
    "  --debug-dir DIR  also look for debug files in DIR (by build-id: DIR/.build-id/xx/yyyy.debug,\n"
    "                   and by name); repeatable. The defaults are the binary's directory, its .debug\n"
    "                   subdirectory and /usr/lib/debug. A binary or library that is not where it ran\n"
    "                   (a snapshot read on another machine) is looked for in each DIR, then\n"
    "                   /usr/lib/debug, as .build-id/xx/yyyy.debug, .build-id/xx/yyyy, NAME and\n"
    "                   NAME.debug; a file is used only when its build-id is the recorded one.\n"
    "  --no-symbolize   use only the names recorded in the snapshot at dump time (no debug info).\n"
    "  --max-memory SIZE  the memory the reader may take for one snapshot's model (SIZE as for --max-peak).\n"
    "                   By default 128 x the file's size + 32 MiB, at most 16 GiB: a few kilobytes of\n"
    "                   compressed data can claim gigabytes. A snapshot over it is refused with one\n"
    "                   line that says so; this raises the limit.\n"
    "  --native         text: every frame of stacks that have Python frames. By default such a stack\n"
    "                   shows a \"via\" line (its innermost native frame outside the CUDA runtime and\n"
    "                   driver, allocators, libffi/ctypes and the interpreter), then its Python frames\n"
    "                   innermost first (--frames of them), then how many native frames were hidden.\n"
    "                   A site's headline names its innermost Python frame, else its innermost\n"
    "                   meaningful native frame; where two rows' headlines read the same (two lines\n"
    "                   calling one helper), each adds the first caller that tells it apart:\n"
    "                   grab (my_prog.c:7) \xe2\x86\x90 main (my_prog.c:21). Stacks without Python frames always\n"
    "                   show every frame.\n"
    "  --split          text and markdown: one row per call site. By default the call sites whose\n"
    "                   innermost frame of the program's own code (not the standard library,\n"
    "                   site-packages/dist-packages or a framework) is the same line form one row,\n"
    "                   that line with the sums of their bytes and allocations, its largest sites\n"
    "                   listed beneath. Sites without such a frame stay one row each, except on a\n"
    "                   framework's native threads (a Python process's), where the same named\n"
    "                   native headline forms one row.\n"
    "  --diff BASE      compare BASE with NEW (the positional argument): the change in peak bytes of\n"
    "                   each call site, largest absolute change first (text, or json with schema\n"
    "                   oomtrace-diff/1). The peak is each snapshot's leading one (the failing device's,\n"
    "                   else the largest) and its site table at the peak. Sites are matched by function names,\n"
    "                   Python file:line and module base names, never by address (a Python file by\n"
    "                   its name, or its path inside an installed package: two checkouts of one\n"
    "                   program match); sites whose stacks read the same are merged. Where two\n"
    "                   sites of one snapshot read the same by names (two lines calling one\n"
    "                   helper), their native frames' file:line (debug info) tell\n"
    "                   them apart and match them. Sites found on one side only are matched again with\n"
    "                   Python line numbers ignored (said next to the site). A row whose headline reads\n"
    "                   as another's adds the first caller that differs (f (a.c:7) \xe2\x86\x90 main (a.c:21)).\n"
    "                   BASE or NEW may be a directory (two runs of oomtrace run, two jobs): its snapshot\n"
    "                   with the largest peak is compared (the one a gate on the directory measures), and\n"
    "                   the report says which it picked, of how many snapshots and processes.\n"
    "\n"
    "CI gates (one line on stderr per gate, passed or failed, naming the gate and the numbers; exit\n"
    "status 1 when one fails; the report is still written):\n"
    "  --max-peak SIZE  fail when the peak exceeds SIZE bytes. SIZE is bytes with an optional K, M, G\n"
    "                   or T (also KiB, MiB, GiB, TiB, KB, MB...: all powers of 1024), e.g. 8G, 1.5GiB;\n"
    "                   a fraction needs one of them (1.5 alone is refused).\n"
    "                   The peak is the snapshot's largest device peak (the high-water mark recorded\n"
    "                   with its live set, else the device's recorded peak):\n"
    "                   this process's tracked device memory at its high-water mark. With a directory,\n"
    "                   the worst snapshot in it; with --diff, NEW.\n"
    "  --baseline SNAP  the snapshot (or directory: its worst snapshot) that --max-growth compares with;\n"
    "                   with --diff it defaults to BASE.\n"
    "  --max-growth PCT fail when 100 * (peak - baseline peak) / baseline peak > PCT (a baseline peak\n"
    "                   of 0 fails on any peak above 0).\n"
    "  --check-gate     only check the gate options (and read the baseline): exit 0, or 2 with one\n"
    "                   line; no snapshot is read. The launcher runs this before its command.\n"
    "  --gate-name NAME a gate's line starts with NAME: instead of oomtrace-read: (the\n"
    "                   launcher passes its own name, so the line names the command the user ran).\n"
    "  -h, --help       this text.\n"
    "  -V, --version    the reader's version and the snapshot format it reads.\n"
    "\n"
    "Where the numbers come from (sizes in bytes, shown as KiB/MiB/GiB = 2^10/2^20/2^30 bytes; times\n"
    "as seconds since the tracer started, from CLOCK_MONOTONIC):\n"
    "  failed request   the allocation call that returned an error: its size as\n"
    "                   requested, the driver entry point, device, memory category and CUresult.\n"
    "  total, free      cuMemGetInfo, called when the snapshot was written (not at the peak).\n"
    "  baseline         total - free before this process's first tracked allocation on the device\n"
    "                   (other processes and the CUDA context at that time).\n"
    "  tracked          this process's live device allocations as counted by oomtrace (categories\n"
    "                   device, async, vmm, managed, array), at the snapshot.\n"
    "  peak             high-water mark of tracked bytes, with the event sequence number that set it.\n"
    "                   Its site table is the exact live set at that moment.\n"
    "  at the failure   the live set when the allocation failed (recorded in an oom snapshot),\n"
    "                   on the failing device.\n"
    "  live             the live set when the snapshot was written, device memory on all devices.\n"
    "  pools            stream-ordered pools' reserved and used bytes (cuMemPoolGetAttribute at the\n"
    "                   snapshot), shown apart from allocations: a pool holds memory no site owns.\n"
    "  host pinned      page-locked host memory; never added to device totals.\n"
    "  other processes  NVML's per-process usage on the device at the snapshot, when available.\n"
    "  unaccounted      used - tracked - baseline - other processes: memory oomtrace cannot attribute.\n"
    "  call site        allocations with the same backtrace, merged: bytes, count and share of the\n"
    "                   moment's total. Stacks are innermost first; Python frames read\n"
    "                   file:line in function, native frames function+0xOFFSET (module), or\n"
    "                   function (file:line) when debug info on this machine resolved them.\n"
    "  why              statements derived from those numbers, each with its numbers (docs/JSON.md); a\n"
    "                   statement whose data the snapshot lacks is left out. Kinds (JSON's \"kind\"):\n";
/* Then the kinds (analyze/why/kinds.c), then what to try, then usage_tail. */
static const char usage_remedies[] =
    "  what to try      at most two remedies, strongest first, each only when a number above supports it\n"
    "                   (one for a cause that why states comes before one for a category's share):\n";
static const char usage_tail[] =
    "  events           recorded by the tracer since start; kept in the event ring; dropped with\n"
    "                   the oldest ring chunks. Markers (oomtrace_mark) are listed when they came\n"
    "                   before the peak or the failure in event sequence order.\n"
    "\n"
    "Formats (docs/FORMATS.md):\n"
    "  text             the report for people, in the order above.\n"
    "  json             every field, unknown values null (docs/JSON.md).\n"
    "  folded           one line per call site of the --at moment (default: the peak):\n"
    "                   outermost;...;innermost BYTES, for flamegraph.pl --countname bytes, inferno or\n"
    "                   speedscope. Frames: Python function (file:line), native function, else\n"
    "                   module+0xOFFSET; ';', '\\' and control bytes written as \\xNN. --top N keeps N sites.\n"
    "  markdown         a short summary for a CI job summary ($GITHUB_STEP_SUMMARY): the failed request,\n"
    "                   what held the memory, Why, What to try, the allocator's view, device totals, the\n"
    "                   top --top call sites of the --at moment (default: the peak) with bytes, count,\n"
    "                   share and label, the event counts.\n"
    "  html             one self-contained page (no network): the failed request; what held the memory as\n"
    "                   two stacked bars (at the failure or snapshot, and at the peak) with bytes and\n"
    "                   shares; live device bytes over time replayed from the event ring, stacked by the 8\n"
    "                   largest sites at the peak, with the device total, the peak, the failure and the\n"
    "                   markers; Why, What to try, the allocator's view (the failed request drawn against\n"
    "                   the largest free block); the site table of the --at moment with expandable stacks.\n"
    "                   Write it with -o report.html.\n"
    "                   Markdown and html also take a directory (the run's table and summary, then the shown\n"
    "                   process's report) and --diff (the sides, the peak's change, the changed sites).\n"
    "                   A directory of one process without a rank reads as that process (pid, host,\n"
    "                   command, the snapshot reported), not as a table of ranks.\n"
    "  memviz           a pickle of torch.cuda.memory._snapshot()'s format for pytorch.org/memory_viz and\n"
    "                   torch.cuda._memory_viz: each allocation live at the --at moment (default: the\n"
    "                   snapshot) is a segment with one block; the latest 100,000 ring events up to that\n"
    "                   moment are device_traces entries (time_us on the wall clock). Binary: use -o.\n"
    "\n"
    "Directories: oomtrace-read DIR reads every *.oomt file in DIR, one job's snapshots (torchrun, Slurm,\n"
    "MPI: oomtrace-HOST-PID[-rankR]-N-TRIGGER.oomt, and -flush.oomt files left by processes that did not\n"
    "finish): DIR's own files, not its subdirectories. A DIR that oomtrace run --dir filled holds run-*\n"
    "directories, one per run, and no snapshot of its own: it is refused (exit 2) with one line that counts\n"
    "them and names the latest (by start time), DIR/run-YYYYMMDDTHHMMSSZ-PID: read that one, or another.\n"
    "Only regular files are opened (a FIFO or device named *.oomt is not). Files that cannot be\n"
    "read are skipped; after the report, one line on stderr counts them and names the first with its\n"
    "reason, and the exit status is 2. Processes are\n"
    "told apart by host and pid; each keeps its first out-of-memory snapshot (by the failure's time),\n"
    "else its latest. Shown: a table per rank (rank, host, pid, device ordinal and UUID prefix, peak, live\n"
    "bytes at the failure, failed, finished: yes with an exit snapshot, no when a flush file remains), the\n"
    "first failure by wall-clock time (the snapshot's wall-clock time less the time since the failure), the imbalance of\n"
    "peaks between ranks (difference and max/min), each process's breakdown of what held the memory\n"
    "(parameters, gradients, optimizer state, activations ...: its snapshot's own rows, at the failure,\n"
    "else at the snapshot), then the full report of the first process to fail\n"
    "(else of the largest peak), its tables limited by --top. JSON: schema oomtrace-run/1 (docs/JSON.md).\n"
    "\n"
    "Exit status: 0 report written (and every gate passed), 1 a CI gate failed, 2 bad input, usage or I/O\n"
    "error (one line on stderr; in a directory: when any file could not be read, after the report of the\n"
    "others; a directory with no snapshot, of run-* directories or empty). A snapshot is read from a regular\n"
    "file, or as a stream: standard input as -, or a named pipe such as <(zstdcat S.oomt.zst). A stream is\n"
    "read until its writer closes it, up to 1 GiB (--max-memory SIZE: up to SIZE). In a directory only\n"
    "regular files are read. Input whose first 8 bytes are not the snapshot magic (/dev/zero, a checkpoint,\n"
    "a report) is refused after those 8 bytes.\n"
    "\n"
    "The documents named here (docs/*.md in the source) are installed with the manual, man oomtrace-read,\n"
    "by make install and by the wheel: PREFIX/share/doc/oomtrace/ (for the wheel, the environment's, e.g.\n"
    "VENV/share/doc/oomtrace/JSON.md).\n";

static void print_kinds(const struct ot_why_kind *k, size_t n)
{
    for (size_t i = 0; i < n; i++)
        printf("    %-22s %s\n", k[i].kind, k[i].says);
}

static void print_usage(void)
{
    fputs(usage_text, stdout);
    print_kinds(ot_why_kinds, ot_why_nkinds);
    fputs(usage_remedies, stdout);
    print_kinds(ot_remedy_kinds, ot_remedy_nkinds);
    fputs(usage_tail, stdout);
}

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("oomtrace-read: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(OT_EXIT_BAD);
}

static size_t parse_count(const char *opt, const char *arg)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(arg, &end, 10);
    if (!*arg || *end || errno || arg[0] == '-' || v > 1000000000ull)
        die("%s needs a number from 0 to 1000000000, got '%s' (see --help)", opt, arg);
    return (size_t)v;
}

enum { OPT_TOP = 256, OPT_AT, OPT_FRAMES, OPT_FORMAT, OPT_DEBUG_DIR, OPT_NO_SYMBOLIZE, OPT_MAX_MEMORY };
enum { OPT_NATIVE = 512, OPT_SPLIT, OPT_DIFF, OPT_MAX_PEAK, OPT_BASELINE, OPT_MAX_GROWTH, OPT_CHECK_GATE,
       OPT_GATE_NAME };

/* -o naming a snapshot would replace the only record of an out-of-memory with its own report (one slip of tab
 * completion; the files are the owner's to write): the input itself (same device and inode), or any file that
 * starts with the snapshot magic, is refused. Standard output, a pipe or a terminal are never snapshots. */
static void refuse_output_onto_snapshot(const char *out_path, const char *const inputs[], size_t ninputs)
{
    struct stat os;
    if (!out_path || stat(out_path, &os) != 0 || !S_ISREG(os.st_mode))
        return;
    for (size_t i = 0; i < ninputs; i++) {
        struct stat is;
        if (inputs[i] && strcmp(inputs[i], "-") != 0 && stat(inputs[i], &is) == 0 && is.st_dev == os.st_dev &&
            is.st_ino == os.st_ino)
            die("-o %s is the snapshot being read; give another file", out_path);
    }
    char head[8];
    int fd = open(out_path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    ssize_t n = fd >= 0 ? read(fd, head, sizeof head) : -1;
    if (fd >= 0)
        close(fd);
    if (n == (ssize_t)sizeof head && memcmp(head, OT_MAGIC, sizeof head) == 0)
        die("-o %s is a snapshot; writing the report there would destroy it: give another file", out_path);
}

/* A stream (standard input, a pipe) is read once: given twice (--diff - -, --baseline - with -, - and
 * /dev/stdin), the second read found it empty and said "the file is empty" (helper-91 #8, helper-92 #3). */
static void refuse_one_stream_twice(const char *const inputs[], size_t ninputs)
{
    struct stat st[4];
    bool stream[4] = {false};
    for (size_t i = 0; i < ninputs && i < 4; i++) {
        if (!inputs[i])
            continue;
        bool dash = strcmp(inputs[i], "-") == 0;
        int rc = dash ? fstat(STDIN_FILENO, &st[i]) : stat(inputs[i], &st[i]);
        /* "-" is read from where standard input stands, so even a file there is read once */
        stream[i] = rc == 0 && (dash || (!S_ISREG(st[i].st_mode) && !S_ISDIR(st[i].st_mode)));
        for (size_t k = 0; k < i && stream[i]; k++)
            if (stream[k] && st[k].st_dev == st[i].st_dev && st[k].st_ino == st[i].st_ino)
                die("%s and %s are the same stream, which is read once: give a file for one of them", inputs[k],
                    inputs[i]);
    }
}

/* An option's value was parsed (rc 0), or the run ends saying what the option takes and what it got. */
static bool parsed(int rc, const char *takes)
{
    if (rc < 0)
        die("%s, got '%s'", takes, optarg);
    return true;
}

int main(int argc, char **argv)
{
    struct ot_report_opts ro = {.top = 10, .frames = 8, .at = OT_AT_DEFAULT};
    bool json = false, symbolize = true;
    int (*other_format)(FILE *, const struct ot_analysis *, const struct ot_report_opts *) = NULL;
    const char *format_name = "text";
    const char *out_path = NULL;
    const char **debug_dirs = calloc((size_t)argc + 1, sizeof(char *));
    size_t ndebug = 0;
    struct ot_gate gate = {0};
    const char *diff_base = NULL;
    bool check_gate = false;
    static const struct option longopts[] = {
        {"top", required_argument, NULL, OPT_TOP},
        {"at", required_argument, NULL, OPT_AT},
        {"frames", required_argument, NULL, OPT_FRAMES},
        {"format", required_argument, NULL, OPT_FORMAT},
        {"output", required_argument, NULL, 'o'},
        {"debug-dir", required_argument, NULL, OPT_DEBUG_DIR},
        {"no-symbolize", no_argument, NULL, OPT_NO_SYMBOLIZE},
        {"max-memory", required_argument, NULL, OPT_MAX_MEMORY},
        {"native", no_argument, NULL, OPT_NATIVE},
        {"split", no_argument, NULL, OPT_SPLIT},
        {"diff", required_argument, NULL, OPT_DIFF},
        {"max-peak", required_argument, NULL, OPT_MAX_PEAK},
        {"baseline", required_argument, NULL, OPT_BASELINE},
        {"max-growth", required_argument, NULL, OPT_MAX_GROWTH},
        {"check-gate", no_argument, NULL, OPT_CHECK_GATE},
        {"gate-name", required_argument, NULL, OPT_GATE_NAME},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    if (!debug_dirs)
        die("out of memory");
    /* The options that only keep their value, or set a flag. */
    const struct {
        int opt;
        const char **value; /* keeps optarg */
        bool *flag;         /* else: set to `on` */
        bool on;
        const char *name, *takes; /* for a value that is another option */
    } plain[] = {
        {'o', &out_path, NULL, false, "-o", "FILE"},
        {OPT_DIFF, &diff_base, NULL, false, "--diff", "BASE"},
        {OPT_BASELINE, &gate.baseline, NULL, false, "--baseline", "SNAP"},
        {OPT_GATE_NAME, &gate.speaker, NULL, false, "--gate-name", "NAME"},
        {OPT_NO_SYMBOLIZE, NULL, &symbolize, false, NULL, NULL},
        {OPT_NATIVE, NULL, &ro.native, true, NULL, NULL},
        {OPT_SPLIT, NULL, &ro.split, true, NULL, NULL},
        {OPT_CHECK_GATE, NULL, &check_gate, true, NULL, NULL},
    };
    opterr = 0; /* our own one-line messages */
    int c;
    while ((c = getopt_long(argc, argv, ":o:hV", longopts, NULL)) != -1) {
        size_t k = 0;
        while (k < sizeof plain / sizeof plain[0] && plain[k].opt != c)
            k++;
        if (k < sizeof plain / sizeof plain[0]) {
            /* `--diff --format markdown A B` took --format for BASE and then counted 4 snapshots: an option
             * where a value goes is said as such ("-" alone is standard input). */
            if (plain[k].value && optarg[0] == '-' && optarg[1])
                die("%s takes %s right after it, got the option '%s'%s", plain[k].name, plain[k].takes, optarg,
                    c == OPT_DIFF ? " (usage: oomtrace-read [OPTIONS] --diff BASE NEW)" : "");
            if (plain[k].value)
                *plain[k].value = optarg;
            else
                *plain[k].flag = plain[k].on;
            continue;
        }
        switch (c) {
        case OPT_TOP:
            ro.top = parse_count("--top", optarg);
            ro.top_given = true;
            break;
        case OPT_AT:
            if (!strcmp(optarg, "peak"))
                ro.at = OT_AT_PEAK;
            else if (!strcmp(optarg, "failure"))
                ro.at = OT_AT_FAILURE;
            else if (!strcmp(optarg, "live"))
                ro.at = OT_AT_LIVE;
            else
                die("--at takes peak, failure or live, got '%s'", optarg);
            break;
        case OPT_FRAMES:
            ro.frames = parse_count("--frames", optarg);
            break;
        case OPT_FORMAT:
            other_format = NULL;
            format_name = optarg;
            if (!strcmp(optarg, "text"))
                json = false;
            else if (!strcmp(optarg, "json"))
                json = true;
            else if (!strcmp(optarg, "folded"))
                other_format = ot_report_folded;
            else if (!strcmp(optarg, "markdown"))
                other_format = ot_report_markdown;
            else if (!strcmp(optarg, "html"))
                other_format = ot_report_html;
            else if (!strcmp(optarg, "memviz"))
                other_format = ot_report_memviz;
            else
                die("--format takes text, json, folded, markdown, html or memviz, got '%s'", optarg);
            break;
        case OPT_DEBUG_DIR: {
            /* A typo in the one option meant to supply missing symbols must not pass without a word. */
            struct stat st;
            if (stat(optarg, &st) != 0)
                die("--debug-dir %s: %s", optarg, strerror(errno));
            if (!S_ISDIR(st.st_mode))
                die("--debug-dir %s: not a directory", optarg);
            debug_dirs[ndebug++] = optarg;
            break;
        }
        case OPT_MAX_PEAK:
            gate.max_peak_set = parsed(ot_parse_size(optarg, &gate.max_peak),
                                       "--max-peak takes a size in bytes, with K, M, G or T for powers of 1024 (8G, 1.5GiB)");
            break;
        case OPT_MAX_MEMORY: {
            uint64_t mem = 0;
            if (!parsed(ot_parse_size(optarg, &mem), "--max-memory takes a size in bytes, with K, M, G or T (2G)") || !mem)
                die("--max-memory takes a size in bytes, with K, M, G or T (2G)");
            ot_read_budget_set(mem > SIZE_MAX ? SIZE_MAX : (size_t)mem);
            break;
        }
        case OPT_MAX_GROWTH:
            gate.growth_set = parsed(ot_parse_percent(optarg, &gate.max_growth),
                                     "--max-growth takes a percentage from 0 to 1000000000 (10, 2.5)");
            break;
        case 'h':
            print_usage();
            return OT_EXIT_OK;
        case 'V':
#ifdef OT_HAVE_LIBDW
            printf("oomtrace-read %s (snapshot format %d.x, symbolization with libdw)\n", OT_READ_VERSION, OT_VERSION_MAJOR);
#else
            printf("oomtrace-read %s (snapshot format %d.x, no libdw: dump-time names only)\n", OT_READ_VERSION,
                   OT_VERSION_MAJOR);
#endif
            return OT_EXIT_OK;
        case ':':
            die("%s needs a value (see --help)", argv[optind - 1]);
        default:
            if (optopt)
                die("unknown option '-%c' (see --help)", optopt);
            die("unknown option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (gate.baseline && !gate.growth_set)
        die("--baseline needs --max-growth (see --help)");
    if (gate.growth_set && !gate.baseline && !diff_base)
        die("--max-growth needs --baseline SNAPSHOT (or --diff BASE NEW; see --help)");
    if (check_gate) {
        /* The sizes were parsed above; what is left to know before a long run is whether the baseline reads. */
        if (optind < argc)
            die("--check-gate takes no snapshot, got '%s'", argv[optind]);
        if (!ot_gate_active(&gate))
            die("--check-gate: no gate given (--max-peak, or --baseline with --max-growth)");
        struct ot_load_opts lo = {.symbolize = false, .debug_dirs = debug_dirs, .ndebug = ndebug};
        struct ot_gate_peak base;
        char err[OT_ERRBUF];
        if (gate.baseline && ot_gate_peak_of_path(gate.baseline, &lo, &base, err) < 0)
            die("--baseline %s: %s", gate.baseline, err);
        free(debug_dirs);
        return OT_EXIT_OK;
    }
    if (optind >= argc && diff_base)
        die("--diff %s needs the new snapshot after it (usage: oomtrace-read --diff BASE NEW)", diff_base);
    if (optind >= argc)
        die("no snapshot file given (usage: oomtrace-read [OPTIONS] SNAPSHOT; see --help)");
    if (argc - optind > 1 && diff_base)
        die("--diff takes BASE and NEW, got %d snapshots (usage: oomtrace-read --diff BASE NEW)", argc - optind + 1);
    if (argc - optind > 1)
        die("one snapshot (or run directory) at a time, got %d (usage: oomtrace-read [OPTIONS] SNAPSHOT)", argc - optind);
    /* -o - is standard output, as for curl, tar, sort and zstd: a script's -o "$OUT" with OUT=- left a file
     * named "-" in the current directory, and nothing on the pipe. */
    if (out_path && strcmp(out_path, "-") == 0)
        out_path = NULL;
    const char *path = argv[optind];
    ro.path = path;
    const char *inputs[] = {path, diff_base, gate.baseline};
    refuse_output_onto_snapshot(out_path, inputs, sizeof inputs / sizeof inputs[0]);
    refuse_one_stream_twice(inputs, sizeof inputs / sizeof inputs[0]);
    /* A pickle on a terminal is only noise (and control bytes): it must go to a file or a pipe. */
    if (other_format == ot_report_memviz && !out_path && isatty(STDOUT_FILENO))
        die("--format memviz writes a binary pickle: give -o FILE, or redirect standard output");
    struct ot_run_opts rx = {.ro = ro, .json = json, .out_path = out_path, .gate = gate,
                             .lo = {.symbolize = symbolize, .debug_dirs = debug_dirs, .ndebug = ndebug}};
    if (diff_base || ot_is_dir(path)) {
        if (other_format == ot_report_markdown || other_format == ot_report_html) {
            rx.as_doc = true;
            rx.doc = other_format == ot_report_html ? OT_DOC_HTML : OT_DOC_MARKDOWN;
        } else if (other_format && !diff_base) {
            /* The run directory is what `oomtrace run` leaves: name a file in it, so the user need not list it. */
            struct ot_gate_peak pick;
            char perr[OT_ERRBUF];
            if (ot_gate_peak_of_path(path, &rx.lo, &pick, perr) < 0)
                die("%s: %s", path, perr);
            die("--format %s reads one snapshot, not a directory: give one of its files, e.g. %s (its largest peak)",
                format_name, pick.path);
        } else if (other_format) {
            die("--diff is shown as text, json, markdown or html, not as %s (see --help)", format_name);
        }
        int mrc = diff_base ? ot_run_diff(diff_base, path, &rx) : ot_run_dir(path, &rx);
        free(debug_dirs);
        return mrc;
    }

    struct ot_loaded ld;
    char err[OT_ERRBUF];
    if (ot_load(&ld, path, &rx.lo, err) < 0)
        die("%s: %s", path, err);
    const struct ot_analysis *an = &ld.an;

    struct ot_gate_result gres;
    if (ot_run_gate(&rx, an, path, &gres) < 0)
        exit(OT_EXIT_BAD);
    FILE *out = stdout;
    if (out_path && !(out = fopen(out_path, "w")))
        die("%s: %s", out_path, strerror(errno));
    errno = 0; /* (ot_output_end) */
    int rc = other_format ? other_format(out, an, &ro) : json ? ot_report_json(out, an, &ro) : ot_report_text(out, an, &ro);
    /* A renderer fails on a write error (said here) or after its own line (memviz's, HTML's: out of memory). */
    if (ot_output_end(out, out_path) < 0 || rc < 0)
        exit(OT_EXIT_BAD);

    ot_loaded_free(&ld);
    free(debug_dirs);
    return ot_gate_report(&gres);
}
