/* Python frames: placeholder until the Python reader lands; native stacks only. */
#include "internal.h"

int ot_python_merge(uint64_t *frames, int n, int max, unsigned *flags)
{
    (void)max;
    (void)flags;
    return n;
}

const char *ot_python_version(void)
{
    return "";
}

#include "buf.h"
void ot_pyframes_serialize(struct ot_buf *b)
{
    ot_buf_uv(b, 0);
}
