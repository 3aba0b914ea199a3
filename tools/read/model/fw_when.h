/* Whether the frameworks' view shows the snapshot's moment (fw_when.c). */
#ifndef OT_READ_FW_WHEN_H
#define OT_READ_FW_WHEN_H

#include "model/snapshot.h"

/* Sets s->fw_when, and moves a view that predates the snapshot's moment from s->fw to s->fw_earlier. Called
 * by ot_snapshot_parse once every section is read; a ring chunk it cannot decode only leaves its counts
 * partial (the full scan that every report makes refuses the file). */
void ot_fw_settle(struct ot_snapshot *s);

#endif
