/* Inside analyze/why/: what remedies.c and remedies_growth.c share, the lookups into the statements a remedy
 * rests on and the remedies for growth and for the request (remedies_growth.c). Not for use outside
 * analyze/why/. */
#ifndef OT_READ_WHY_REMEDY_H
#define OT_READ_WHY_REMEDY_H

#include <string.h>

#include "analyze/why/item.h"

/* The activation remedies are PyTorch's (checkpointing, autocast): a snapshot whose frameworks' view names
 * only others (JAX, CuPy) does not get them from stack guesses. */
static inline bool pytorch_or_unknown(const struct ot_framework *fw)
{
    if (!fw->present || !fw->ninfo)
        return true;
    for (size_t i = 0; i < fw->ninfo; i++)
        if (ot_str_eq(fw->info[i].framework, "torch"))
            return true;
    return false;
}

static inline uint64_t item_num(const struct ot_why_item *it, const char *key)
{
    for (size_t k = 0; k < it->nnum; k++)
        if (strcmp(it->num[k].key, key) == 0)
            return it->num[k].kind == OT_WHY_I64 ? (uint64_t)it->num[k].i : it->num[k].u;
    return 0;
}

static inline const struct ot_why_item *why_find(const struct ot_why *why, const char *kind)
{
    for (size_t i = 0; why && i < why->n; i++)
        if (strcmp(why->v[i].kind, kind) == 0)
            return &why->v[i];
    return NULL;
}

/* The remedies for memory that grows (leak, unbounded_site) and for the request itself (request_too_large,
 * step_input): remedies_growth.c. */
void remedy_leak(struct ot_why *w, const struct ot_analysis *a);
void remedy_unbounded_site(struct ot_why *w, const struct ot_analysis *a);
void remedy_request_too_large(struct ot_why *w, const struct ot_analysis *a);
void remedy_pin_less(struct ot_why *w, const struct ot_analysis *a);
void remedy_free_unused(struct ot_why *w, const struct ot_analysis *a);
void remedy_step_input(struct ot_why *w, const struct ot_analysis *a);
void remedy_bound_input(struct ot_why *w, const struct ot_analysis *a);
/* The pool's maximum size refused the request (why: pool_cap; pool_cap.c). */
void remedy_pool_cap(struct ot_why *w, const struct ot_analysis *a);
/* PyTorch's per-process memory fraction refused the request (why: framework_limit; fw_limit.c). */
void remedy_fw_limit(struct ot_why *w, const struct ot_analysis *a);

#endif
