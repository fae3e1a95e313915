/* SPDX-License-Identifier: Apache-2.0 */
/* ops/mega_moe/gate.h: the compute gate (gate.c): at most cores / pool threads ranks of this process
 * run FFN batches at once (the others sleep); enter and leave around each batch. */
#ifndef MEGAMOE_OPS_MEGA_MOE_GATE_H
#define MEGAMOE_OPS_MEGA_MOE_GATE_H

void mm_moe_gate_enter(void);
void mm_moe_gate_leave(void);

#endif
