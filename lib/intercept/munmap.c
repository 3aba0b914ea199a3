/* The exported munmap: counted (common/unmaps.h), so that the borrowing thread can read a waiting Python
 * thread's frames with plain loads while no unmap came since it last read them through the kernel
 * (capture/pyborrow.c). CPython frees its threads' frame stacks with munmap through its arena allocator,
 * by the dynamic symbol; glibc's malloc unmaps by its own internal call, which does not come here, and the
 * readers use plain loads only on frames that live in those frame stacks.
 *
 * The call itself is the real one, with the caller's arguments, result and errno; nothing else is done
 * here, and no lock is taken (the wait is for reads of a few hundred ns). */
#include <errno.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/defs.h"
#include "common/unmaps.h"
#include "driver/real.h"

static __thread int looking_up __attribute__((tls_model("initial-exec")));

OT_EXPORT int munmap(void *addr, size_t len)
{
    static void *real;
    int (*fn)(void *, size_t) = (int (*)(void *, size_t))__atomic_load_n(&real, __ATOMIC_ACQUIRE);
    if (!fn && !looking_up) { /* (the lookup's own unmaps, if any, take the system call) */
        looking_up = 1;
        fn = (int (*)(void *, size_t))ot_real_next(&real, "munmap");
        looking_up = 0;
    }
    ot_unmaps_begin();
    int r;
    if (fn) {
        r = fn(addr, len);
    } else { /* before the C library's dlsym can be found: the system call, which is all glibc's munmap is */
        long s = syscall(SYS_munmap, addr, len);
        r = s == 0 ? 0 : -1;
    }
    int e = errno;
    ot_unmaps_end();
    errno = e;
    return r;
}
