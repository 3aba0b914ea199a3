/* bench/lock_cost.c: what one take and give of the recorder's lock costs, owned against shared
 * (record/lock.h), on this host: issue 16's nineteenth pass. Each event takes the lock, writes a ring
 * record's worth of stores under it, and gives it back; between events the program's own work leaves
 * stores in flight (WORK stores to its own buffer), as the driver call does in a real pair.
 *   lock_cost [EVENTS] [ROUNDS]   one JSON line: ns an event, least over ROUNDS, by mode and work
 * Modes alternate within the process; nothing is asserted (bench/README.md). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/clock.h"
#include "record/lock.h"

static volatile uint64_t ring[64], work[512];

static double run(int owned, int nwork, long events)
{
    ot_lock_owner_init(owned);
    for (int i = 0; i < 2000; i++) { /* long enough a run to own it, when allowed */
        ot_lock_take();
        ot_lock_give();
    }
    uint64_t t0 = ot_mono_ns();
    for (long e = 0; e < events; e++) {
        for (int w = 0; w < nwork; w++)
            work[(e * 8 + w) & 511] = (uint64_t)e;
        ot_lock_take();
        for (int r = 0; r < 8; r++)
            ring[(e * 8 + r) & 63] = (uint64_t)e + r;
        ot_lock_give();
    }
    return (double)(ot_mono_ns() - t0) / (double)events;
}

int main(int argc, char **argv)
{
    long events = argc > 1 ? atol(argv[1]) : 2000000;
    int rounds = argc > 2 ? atoi(argv[2]) : 9;
    static const int works[] = {0, 64};
    double best[2][2] = {{1e18, 1e18}, {1e18, 1e18}};
    for (int r = 0; r < rounds; r++)
        for (int w = 0; w < 2; w++)
            for (int o = 0; o < 2; o++) {
                double ns = run(o, works[w], events);
                if (ns < best[w][o])
                    best[w][o] = ns;
            }
    struct ot_lock_counts c;
    ot_lock_counts(&c);
    printf("{\"bench\": \"lock_cost\", \"unit\": \"ns/event\", \"events\": %ld, \"rounds\": %d, \"ownership\": %d, "
           "\"shared\": %.2f, \"owned\": %.2f, \"shared_work64\": %.2f, \"owned_work64\": %.2f}\n",
           events, rounds, c.ownership, best[0][0], best[0][1], best[1][0], best[1][1]);
    return 0;
}
