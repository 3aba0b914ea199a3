/* One hop of bench/alloc_objects' stack: a call that passes through a shared object of its own, so that
 * the unwinder must find this object's unwind information. Built two ways (bench/bench.mk):
 *   std    ordinary -O2 code with .eh_frame (what most of a PyTorch process is);
 *   nofde  no unwind tables at all, frame pointer kept (the unwinder falls back to the frame chain);
 * expr and drap take their hop from tests/unit/walk_hops.S: walk_hop_expr (the CFA given as a DWARF
 * expression) and walk_hop_drap (a realigned frame as GCC writes it). */
volatile int ot_hop_sink;

__attribute__((noinline)) void ot_bench_hop(void (*next)(void *), void *arg)
{
    next(arg);
    ot_hop_sink++; /* not a tail call: the hop keeps its frame */
}
