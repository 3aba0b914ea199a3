/* Unit tests of the reader's pieces behind the Python-first stacks, the CI gates and the site tables:
 * size and percentage parsing, the gates' verdicts at their exact boundaries, C++ name shortening, which
 * native frames count as plumbing, and host-located VMM memory kept out of device tables. The whole
 * modes (text, JSON, --diff, directories, exit codes) are covered by tests/golden/run.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "modes/gate.h"
#include "analyze/sites.h"
#include "analyze/stackview.h"

#define MiB (1024ull * 1024)

static void test_parse_size(void **state)
{
    (void)state;
    static const struct {
        const char *s;
        uint64_t v;
    } ok[] = {
        {"0", 0},
        {"123", 123},
        {"10B", 10},
        {"8G", 8ull << 30},
        {"8g", 8ull << 30},
        {"1.5GiB", 3ull << 29},
        {"512M", 512 * MiB},
        {"512MB", 512 * MiB},
        {"64KiB", 64 * 1024},
        {"2k", 2048},
        {"1T", 1ull << 40},
        {"0.5K", 512},
        {"9223372036854775808", 9223372036854775808ull},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        uint64_t v = 1;
        assert_int_equal(ot_parse_size(ok[i].s, &v), 0);
        assert_int_equal(v, ok[i].v);
    }
    static const char *const bad[] = {"", "-1", "+1", " 5", "12X", "1.", "G", "1GG", "1.5.5G", "99999999999999999999",
                                      "9223372036854775809", "8388609T", "1e3",
                                      /* a fraction of a byte: meant as 1.5G, never a 1-byte gate */
                                      "1.5", "1.5B", "0.5"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t v = 7;
        assert_int_equal(ot_parse_size(bad[i], &v), -1);
        assert_int_equal(v, 7);
    }
}

static void test_parse_percent(void **state)
{
    (void)state;
    double v = -1;
    assert_int_equal(ot_parse_percent("10", &v), 0);
    assert_true(v == 10.0);
    assert_int_equal(ot_parse_percent("2.5%", &v), 0);
    assert_true(v == 2.5);
    assert_int_equal(ot_parse_percent("0", &v), 0);
    assert_true(v == 0.0);
    static const char *const bad[] = {"", "-1", "abc", "5%%", "nan", "inf", "2e9", " 1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_int_equal(ot_parse_percent(bad[i], &v), -1);
}

static struct ot_gate_peak peak(uint64_t bytes, const char *path)
{
    struct ot_gate_peak p = {.known = true, .bytes = bytes, .device = 0};
    snprintf(p.path, sizeof(p.path), "%s", path);
    return p;
}

static void test_gate_eval(void **state)
{
    (void)state;
    struct ot_gate_result r;
    struct ot_gate g = {.max_peak_set = true, .max_peak = 640 * MiB};
    struct ot_gate_peak p = peak(640 * MiB, "new.oomt");
    ot_gate_eval(&g, &p, NULL, &r);
    assert_int_equal(r.rc, 0); /* equal is not above */
    /* A passing gate says so in one line, with what it measured: a CI log shows that it ran. */
    assert_int_equal(r.nmsg, 1);
    assert_string_equal(r.msg[0], "gate --max-peak passed: peak 640 MiB (671088640 bytes) on device 0 in new.oomt "
                                  "is within 640 MiB (671088640 bytes)");
    p.bytes++;
    ot_gate_eval(&g, &p, NULL, &r);
    assert_int_equal(r.rc, 1);
    assert_int_equal(r.nmsg, 1);
    assert_non_null(strstr(r.msg[0], "gate --max-peak failed: peak 640 MiB (671088641 bytes) on device 0 in new.oomt "
                                     "exceeds 640 MiB (671088640 bytes)"));

    /* Growth: 10% exactly passes --max-growth 10, one byte more fails. */
    struct ot_gate gg = {.growth_set = true, .max_growth = 10, .baseline = "base.oomt"};
    struct ot_gate_peak b = peak(1000 * MiB, "base.oomt"), n = peak(1100 * MiB, "new.oomt");
    ot_gate_eval(&gg, &n, &b, &r);
    assert_int_equal(r.rc, 0);
    assert_int_equal(r.nmsg, 1);
    assert_string_equal(r.msg[0], "gate --max-growth passed: peak 1.07 GiB (1153433600 bytes) in new.oomt is 10% above the "
                                  "baseline's 1000 MiB (1048576000 bytes) in base.oomt, within 10%");
    n.bytes += 1;
    ot_gate_eval(&gg, &n, &b, &r);
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.msg[0], "gate --max-growth failed"));
    assert_non_null(strstr(r.msg[0], "more than 10%"));
    /* The growth as people write it: "20%", not "20.0000%"; just enough decimals to exceed the limit. */
    b.bytes = 100;
    n.bytes = 120;
    gg.max_growth = 5;
    ot_gate_eval(&gg, &n, &b, &r);
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.msg[0], " is 20% above the baseline's"));
    b.bytes = 1000000;
    n.bytes = 1000040; /* 0.004% over a limit of 0.003% */
    gg.max_growth = 0.003;
    ot_gate_eval(&gg, &n, &b, &r);
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.msg[0], " is 0.004% above the baseline's"));
    /* One decimal when that is enough: "255.9%", not "255.8719%" (walk finding 11); "9.9997%" against 10 stays. */
    b.bytes = 281 * MiB;
    n.bytes = 1000 * MiB;
    gg.max_growth = 5;
    ot_gate_eval(&gg, &n, &b, &r);
    assert_non_null(strstr(r.msg[0], " is 255.9% above the baseline's"));
    b.bytes = 671109120;
    n.bytes = 738217984;
    gg.max_growth = 10;
    ot_gate_eval(&gg, &n, &b, &r);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.msg[0], " is 9.9997% above the baseline's"));
    b.bytes = 1000 * MiB;
    /* A shrinking peak never fails; a zero baseline fails on any peak above 0. */
    n.bytes = 10;
    gg.max_growth = 0;
    ot_gate_eval(&gg, &n, &b, &r);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.msg[0], "gate --max-growth passed: peak 10 B (10 bytes) in new.oomt is 100% below the baseline's"));
    b.bytes = 0;
    ot_gate_eval(&gg, &n, &b, &r);
    assert_int_equal(r.rc, 1);
    n.bytes = 0;
    ot_gate_eval(&gg, &n, &b, &r);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.msg[0], "gate --max-growth passed: peak 0 B (0 bytes) in new.oomt, the baseline's peak is 0 B"));
    /* Both gates failing: two lines. */
    struct ot_gate both = {.max_peak_set = true, .max_peak = 1, .growth_set = true, .max_growth = 1};
    b.bytes = 100;
    n.bytes = 200;
    ot_gate_eval(&both, &n, &b, &r);
    assert_int_equal(r.rc, 1);
    assert_int_equal(r.nmsg, 2);
    /* One passing, one failing: a line each, and the status of the failure. */
    both.max_peak = 200;
    ot_gate_eval(&both, &n, &b, &r);
    assert_int_equal(r.rc, 1);
    assert_int_equal(r.nmsg, 2);
    assert_non_null(strstr(r.msg[0], "gate --max-peak passed: "));
    assert_non_null(strstr(r.msg[1], "gate --max-growth failed: "));
}

static void expect_short(const char *in, const char *out)
{
    struct ot_str s = ot_short_function(ot_cstr(in));
    assert_int_equal(s.n, strlen(out));
    assert_memory_equal(s.p, out, s.n);
}

static void test_short_function(void **state)
{
    (void)state;
    expect_short("at::native::empty_cuda(c10::ArrayRef<long>, std::optional<c10::ScalarType>)", "at::native::empty_cuda");
    expect_short("(anonymous namespace)::foo(int)", "(anonymous namespace)::foo");
    expect_short("Foo::operator()(int) const", "Foo::operator()");
    expect_short("std::vector<int, std::allocator<int> >::push_back(int const&)",
                 "std::vector<int, std::allocator<int> >::push_back");
    expect_short("load_weights", "load_weights");
    expect_short("(broken", "(broken");
    expect_short("", "");
}

static struct ot_frame native(const char *fn, const char *module)
{
    struct ot_frame f = {.kind = OT_FRAME_NATIVE};
    f.function = fn ? ot_cstr(fn) : (struct ot_str){NULL, 0};
    f.module = module ? ot_cstr(module) : (struct ot_str){NULL, 0};
    return f;
}

static void test_plumbing(void **state)
{
    (void)state;
    struct ot_frame f;
    f = native("cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.13");
    assert_true(ot_frame_is_plumbing(&f));
    f = native("something", "/usr/lib/x86_64-linux-gnu/libcuda.so.1");
    assert_true(ot_frame_is_plumbing(&f));
    f = native("c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc(signed char, unsigned long, "
               "CUstream_st*)",
               "/opt/torch/lib/libtorch_cuda.so");
    assert_true(ot_frame_is_plumbing(&f));
    f = native("at::detail::empty_generic(c10::ArrayRef<long>, c10::Allocator*, c10::DispatchKeySet)",
               "/opt/torch/lib/libtorch_cpu.so");
    assert_true(ot_frame_is_plumbing(&f));
    f = native("at::detail::empty_cuda(c10::ArrayRef<long>, c10::Allocator*)", "/opt/torch/lib/libtorch_cuda.so");
    assert_false(ot_frame_is_plumbing(&f)); /* "Allocator" in the parameters does not count */
    f = native(NULL, "/opt/torch/lib/libtorch_cuda.so");
    assert_true(ot_frame_is_plumbing(&f));
    f = native("_PyObject_MakeTpCall", "/usr/bin/python3.12");
    assert_true(ot_frame_is_plumbing(&f));
    f = native("PyCFuncPtr_call", "/usr/lib/python3.11/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so");
    assert_true(ot_frame_is_plumbing(&f));
    f = native("ffi_call", "/usr/lib/x86_64-linux-gnu/libffi.so.8");
    assert_true(ot_frame_is_plumbing(&f));
    f = native("load_weights", "/work/build/tests/golden_workload");
    assert_false(ot_frame_is_plumbing(&f));
    f = native("cublasCreate_v2", "/usr/local/cuda/lib64/libcublas.so.13");
    assert_false(ot_frame_is_plumbing(&f));
    struct ot_frame py = {.kind = OT_FRAME_PY, .function = ot_cstr("forward"), .file = ot_cstr("train.py")};
    assert_false(ot_frame_is_plumbing(&py));
}

/* Host-located VMM memory (device -1, category vmm, flag 0x2) is not device memory, in "all devices"
 * tables as in per-device ones. */
static void test_host_vmm_not_device(void **state)
{
    (void)state;
    struct ot_record recs[] = {
        {.address = 0x1000, .size = 100, .device = 0, .category = OT_CAT_DEVICE, .stack_id = 1},
        {.address = 0x2000, .size = 1000, .device = -1, .category = OT_CAT_VMM, .flags = OT_REC_HOST_LOCATION, .stack_id = 2},
        {.address = 0x3000, .size = 10, .device = 0, .category = OT_CAT_VMM, .stack_id = 3},
        {.address = 0x4000, .size = 5, .device = 1, .category = OT_CAT_ASYNC, .stack_id = 3},
        {.address = 0x5000, .size = 7, .device = -1, .category = OT_CAT_HOST_PINNED, .stack_id = 4},
    };
    struct ot_sites s;
    struct ot_site_filter all = {.any_device = true, .device_memory = true};
    assert_int_equal(ot_sites_build(recs, 5, &all, &s), 0);
    assert_int_equal(s.bytes, 115);
    assert_int_equal(s.count, 3);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.v[0].stack_id, 1);
    assert_int_equal(s.v[1].stack_id, 3);
    assert_int_equal(s.v[1].bytes, 15);
    ot_sites_free(&s);
    struct ot_site_filter host = {.device = -1, .device_memory = true};
    assert_int_equal(ot_sites_build(recs, 5, &host, &s), 0);
    assert_int_equal(s.bytes, 0);
    assert_int_equal(s.n, 0);
    ot_sites_free(&s);
    struct ot_site_filter vmm = {.any_device = true, .category = OT_CAT_VMM};
    assert_int_equal(ot_sites_build(recs, 5, &vmm, &s), 0);
    assert_int_equal(s.bytes, 1010); /* by category, host VMM is still VMM */
    ot_sites_free(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_size),     cmocka_unit_test(test_parse_percent), cmocka_unit_test(test_gate_eval),
        cmocka_unit_test(test_short_function), cmocka_unit_test(test_plumbing),      cmocka_unit_test(test_host_vmm_not_device),
    };
    return cmocka_run_group_tests_name("readmodes", tests, NULL, NULL);
}
