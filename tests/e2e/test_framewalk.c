/* Unit tests of the walk over a stack's frames (analyze/stackview.h, ot_walk_*), the one loop every report
 * and analysis reads stacks through: its order both ways, what each filter keeps and how depth counts the
 * kept frames, the word each frame comes from, whose frame it is (the program's, plumbing, a framework's),
 * and a stack id that is not in the snapshot. The stack is built in memory, named from the snapshot's own
 * dump-time tables (no debug info): a PyTorch program failing in the CUDA runtime. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "analyze/stackview.h"

#define PY(id) (((uint64_t)(id) << 1) | OT_FRAME_PYTHON)
#define NATIVE(addr) ((uint64_t)(addr) << 1)
#define S(lit) {lit, sizeof(lit) - 1}

static struct ot_module modules[] = {
    {.path = S("/opt/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so"), .start = 0x1000, .end = 0x2000},
    {.path = S("/usr/local/cuda/lib64/libcudart.so.13"), .start = 0x3000, .end = 0x4000},
    {.path = S("/work/app/launcher"), .start = 0x5000, .end = 0x6000},
};
static struct ot_symbol symbols[] = {
    {.address = 0x3010, .name = S("cudaMalloc")},
    {.address = 0x1010, .name = S("at::native::empty_cuda")},
    {.address = 0x5010, .name = S("main")},
};
static struct ot_pyframe pyframes[] = {
    {.id = 7, .function = S("Linear.forward"), .file = S("/opt/venv/lib/python3.12/site-packages/torch/nn/modules/linear.py"), .line = 125},
    {.id = 9, .function = S("forward"), .file = S("/work/app/train.py"), .line = 42},
};
/* Innermost first: the runtime, PyTorch's native allocation, PyTorch's Python layer, the program's line,
 * the interpreter's main. */
static const uint64_t words[] = {NATIVE(0x3010), NATIVE(0x1010), PY(7), PY(9), NATIVE(0x5010)};
static struct ot_stack stack = {.id = 1, .nframes = 5, .frames = words};

struct fixture {
    struct ot_snapshot s;
    struct ot_resolver *res;
};

static int setup(void **state)
{
    static struct fixture fx;
    memset(&fx, 0, sizeof(fx));
    fx.s.modules = modules;
    fx.s.nmodules = 3;
    fx.s.symbols = symbols;
    fx.s.nsymbols = 3;
    fx.s.pyframes = pyframes;
    fx.s.npyframes = 2;
    fx.s.stacks = &stack;
    fx.s.nstacks = 1;
    if (ot_u64map_init(&fx.s.symbol_index, 4) < 0 || ot_u64map_init(&fx.s.pyframe_index, 4) < 0)
        return -1;
    for (uint32_t i = 0; i < 3; i++)
        ot_u64map_put(&fx.s.symbol_index, symbols[i].address, i);
    for (uint32_t i = 0; i < 2; i++)
        ot_u64map_put(&fx.s.pyframe_index, pyframes[i].id, i);
    fx.res = ot_resolver_new(&fx.s, NULL);
    *state = &fx;
    return fx.res ? 0 : -1;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    ot_resolver_free(fx->res);
    ot_u64map_free(&fx->s.symbol_index);
    ot_u64map_free(&fx->s.pyframe_index);
    return 0;
}

static bool named(const struct ot_frame_walk *w, const char *name)
{
    return ot_str_eq(w->f->function, name);
}

static void test_all_innermost_first(void **state)
{
    struct fixture *fx = *state;
    static const char *const names[] = {"cudaMalloc", "at::native::empty_cuda", "Linear.forward", "forward", "main"};
    static const bool py[] = {false, false, true, true, false};
    static const char *const module[] = {"libcudart.so.13", "libtorch_cuda.so", NULL, NULL, "launcher"};
    struct ot_frame_walk w;
    size_t n = 0;
    for (ot_walk_begin(&w, fx->res, &stack, OT_WALK_ALL); ot_walk_next(&w); n++) {
        assert_true(n < 5);
        assert_true(named(&w, names[n]));
        assert_int_equal(w.depth, n);
        assert_int_equal(w.py, py[n]);
        assert_int_equal(w.word, words[n]);
        if (module[n])
            assert_true(ot_str_eq(w.module, module[n]));
        else
            assert_null(w.module.p);
    }
    assert_int_equal(n, 5);
    assert_false(ot_walk_next(&w)); /* stays at its end */
}

static void test_outermost_first(void **state)
{
    struct fixture *fx = *state;
    static const char *const names[] = {"main", "forward", "Linear.forward", "at::native::empty_cuda", "cudaMalloc"};
    struct ot_frame_walk w;
    size_t n = 0;
    for (ot_walk_begin(&w, fx->res, &stack, OT_WALK_ALL | OT_WALK_OUTERMOST); ot_walk_next(&w); n++) {
        assert_true(n < 5);
        assert_true(named(&w, names[n]));
        assert_int_equal(w.depth, n);
    }
    assert_int_equal(n, 5);
    /* Python frames only, outermost first: the program's line, then the library's. */
    ot_walk_begin(&w, fx->res, &stack, OT_WALK_PY | OT_WALK_OUTERMOST);
    assert_true(ot_walk_next(&w) && named(&w, "forward") && w.depth == 0);
    assert_true(ot_walk_next(&w) && named(&w, "Linear.forward") && w.depth == 1);
    assert_false(ot_walk_next(&w));
}

static void test_filters(void **state)
{
    struct fixture *fx = *state;
    struct ot_frame_walk w;
    /* Python frames, depth counted among them. */
    ot_walk_begin(&w, fx->res, &stack, OT_WALK_PY);
    assert_true(ot_walk_next(&w) && named(&w, "Linear.forward") && w.depth == 0 && w.word == PY(7));
    assert_true(ot_walk_next(&w) && named(&w, "forward") && w.depth == 1);
    assert_false(ot_walk_next(&w));
    /* Native frames that are not plumbing: the runtime's cudaMalloc is left out. */
    ot_walk_begin(&w, fx->res, &stack, OT_WALK_NATIVE);
    assert_true(ot_walk_next(&w) && named(&w, "at::native::empty_cuda") && w.depth == 0);
    assert_true(ot_walk_next(&w) && named(&w, "main") && w.depth == 1);
    assert_false(ot_walk_next(&w));
}

static void test_whose_frame(void **state)
{
    struct fixture *fx = *state;
    static const bool user[] = {false, false, false, true, false};
    static const bool plumbing[] = {true, false, false, false, false};
    static const char *const framework[] = {NULL, "torch", "torch", NULL, NULL};
    struct ot_frame_walk w;
    size_t n = 0;
    for (ot_walk_begin(&w, fx->res, &stack, OT_WALK_ALL); ot_walk_next(&w); n++) {
        assert_int_equal(ot_walk_is_user(&w), user[n]);
        assert_int_equal(ot_walk_is_plumbing(&w), plumbing[n]);
        if (framework[n])
            assert_string_equal(ot_walk_framework(&w), framework[n]);
        else
            assert_null(ot_walk_framework(&w));
    }
    assert_int_equal(n, 5);
}

static void test_unknown_and_empty_stack(void **state)
{
    struct fixture *fx = *state;
    struct ot_frame_walk w;
    ot_walk_begin(&w, fx->res, ot_snapshot_stack(&fx->s, 12345), OT_WALK_ALL);
    assert_false(ot_walk_next(&w));
    ot_walk_begin(&w, fx->res, NULL, OT_WALK_PY | OT_WALK_OUTERMOST);
    assert_false(ot_walk_next(&w));
    struct ot_stack empty = {.id = 2};
    ot_walk_begin(&w, fx->res, &empty, OT_WALK_OUTERMOST);
    assert_false(ot_walk_next(&w));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_all_innermost_first), cmocka_unit_test(test_outermost_first),
        cmocka_unit_test(test_filters),             cmocka_unit_test(test_whose_frame),
        cmocka_unit_test(test_unknown_and_empty_stack),
    };
    return cmocka_run_group_tests_name("framewalk", tests, setup, teardown);
}
