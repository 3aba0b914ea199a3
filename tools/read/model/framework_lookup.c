/* Lookups in a parsed framework view, and names for its numbers. */
#include "model/framework.h"

#include <string.h>

const char *ot_fw_kind_name(uint64_t kind)
{
    static const char *const names[] = {"unknown", "info",  "stats", "settings",     "segments", "blocks",
                                        "arrays",  "error", "block frames", "roles", "steps"};
    return kind < sizeof(names) / sizeof(names[0]) ? names[kind] : "unknown";
}

const char *ot_fw_role_name(uint64_t category)
{
    switch (category) {
    case OT_FW_ROLE_PARAMETERS: return "parameters";
    case OT_FW_ROLE_GRADIENTS: return "gradients";
    case OT_FW_ROLE_OPTIMIZER_STATE: return "optimizer state";
    case OT_FW_ROLE_BUFFERS: return "buffers";
    default: return "unknown";
    }
}

const char *ot_fw_block_state_name(uint64_t state)
{
    switch (state) {
    case OT_FW_BLOCK_INACTIVE: return "free";
    case OT_FW_BLOCK_ALLOCATED: return "allocated";
    case OT_FW_BLOCK_PENDING_FREE: return "pending free";
    default: return "unknown";
    }
}

bool ot_fw_stat_get(const struct ot_framework *f, const char *framework, uint64_t device, const char *key,
                    int64_t *value)
{
    for (size_t i = 0; i < f->nstats; i++) {
        const struct ot_fw_stats *s = &f->stats[i];
        if (s->device != device || !ot_str_eq(s->framework, framework))
            continue;
        for (size_t k = 0; k < s->n; k++)
            if (ot_str_eq(s->v[k].key, key)) {
                *value = s->v[k].value;
                return true;
            }
    }
    return false;
}

struct ot_str ot_fw_setting_get(const struct ot_framework *f, const char *framework, const char *key)
{
    for (size_t i = 0; i < f->nsettings; i++) {
        const struct ot_fw_settings *s = &f->settings[i];
        if (!ot_str_eq(s->framework, framework))
            continue;
        for (size_t k = 0; k < s->n; k++)
            if (ot_str_eq(s->v[k].key, key))
                return s->v[k].value;
    }
    return (struct ot_str){NULL, 0};
}
