/* Every kind of Why statement and What to try remedy, with one line saying when it is made: the list that
 * oomtrace-read --help prints, and that tests/sh/why_kinds.sh checks against the kinds the code makes and
 * the tables of docs/JSON.md (which give each kind's numbers), so the three cannot drift apart. */
#include "analyze/why.h"

const struct ot_why_kind ot_why_kinds[] = {
    {"request_exceeds_total", "the failed request is larger than the whole device"},
    {"request_exceeds_free", "the failed request is larger than the free memory, and by how much"},
    {"request_within_free", "the failed request was not larger than the free memory at the snapshot"},
    {"host_request", "the failed request was for pinned host memory: the host or its memlock limit refused it"},
    {"other_processes", "other processes' memory on the device (NVML), and what no one accounts for"},
    {"baseline_in_use", "memory in use before the process's first allocation, with no other process named"},
    {"pool_cached", "stream-ordered pools reserve memory their allocations do not use"},
    {"pool_cap", "a request within the free memory, made from a pool the program created: the pool's maxSize"},
    {"peak_site", "one call site holds at least half of the peak"},
    {"peak_phase", "at least half of the peak was allocated after the markers of one label"},
    {"step_inputs", "the optimizer step under way at the failure had other inputs than the one before"},
    {"growing_site", "a call site rose in many intervals (steps, markers, those one kind of marker began, else 8 windows), seldom fell, still grows, and holds it: a leak?"},
    {"growing_request", "the failed request's call site (else a step's height) grew in 4 of 5 of the last 8 or more steps, doubling"},
    {"unfreed_site", "a call site only added to what it held and freed nothing: a cache without a bound"},
    {"nothing_freed", "nothing was freed on the device in the ring, by 4 or more call sites none of which holds a quarter"},
    {"context_ends_unlisted", "context ends whose frees the snapshot does not list: nothing judged from the ring after them"},
    {"largest_rise", "the marker interval with the largest rise of live bytes before the failure"},
    {"step_demand", "the interval under way at the failure asked for 1.5x or more of the one before"},
    {"largest_allocation", "without markers: the largest single allocation, when it adds to the above"},
    {"fragmentation", "a framework's segments held enough free memory for the request, but in pieces"},
    {"framework_cache", "whole segments with no live tensor: freed by the program, kept by the framework"},
    {"graph_private_pool", "CUDA graphs' private pools and what they hold"},
    {"framework_pool_cached", "CuPy's or XLA's pool keeps memory the program freed"},
    {"framework_limit", "a framework's own limit (PyTorch's per-process fraction) refused the request"},
    {"jax_preallocation", "JAX reserved its pool at start: its limit and what is in use"},
};
const size_t ot_why_nkinds = sizeof(ot_why_kinds) / sizeof(ot_why_kinds[0]);

const struct ot_why_kind ot_remedy_kinds[] = {
    {"request_too_large", "make the failed allocation smaller, or use a larger device (then the only one)"},
    {"pin_less", "a pinned host request failed: pin less at once, or raise the locked-memory limit"},
    {"baseline_in_use", "the memory in use before the process started: check nvidia-smi on the host"},
    {"other_process", "another process, or this process's children, hold 10% or more of the device"},
    {"fragmentation", "PyTorch: expandable_segments:True, when the free blocks were enough together"},
    {"jax_preallocation", "JAX: preallocation of half the device or more (XLA_PYTHON_CLIENT_* settings)"},
    {"framework_pool_cache", "CuPy: free_all_blocks() for the pool's freed memory"},
    {"pool_cap", "a pool's maximum size refused the request: raise maxSize, or allocate from another pool"},
    {"framework_limit", "PyTorch's memory fraction refused the request: the fraction that fits, or free the largest site"},
    {"pool_trim", "trim the stream-ordered pools before the request, when their idle memory covered it"},
    {"no_grad", "PyTorch: torch.no_grad() for evaluation or inference that runs with autograd on"},
    {"activations", "activations are half of the peak or more: checkpointing, a smaller batch, bf16"},
    {"optimizer_state", "the optimizer state is 1.5x the parameters or more: an 8-bit optimizer, ZeRO-2/FSDP"},
    {"parameters", "parameters are half of the used memory or more: bf16, 8-bit or 4-bit, adapters"},
    {"leak", "the growing call site's growth per step, interval or second, and how to stop it"},
    {"unbounded_site", "bound the call site that never frees, or free its entries"},
    {"free_unused", "nothing was freed, by many call sites alike: free or reuse buffers once their use ends"},
    {"step_input", "the step under way asked for much more than the one before: its inputs grew"},
    {"bound_input", "a step's request grew step after step: bound its input; with a leak, the steps the leak's fix buys"},
    {"make_room", "the largest call site live at the failure holds what the request was short"},
    {"headroom", "no failure, but the peak left less than 15% of the device free"},
};
const size_t ot_remedy_nkinds = sizeof(ot_remedy_kinds) / sizeof(ot_remedy_kinds[0]);
