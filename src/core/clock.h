/* SPDX-License-Identifier: Apache-2.0 */
/* core/clock.h: the one monotonic clock of the library (waiting deadlines in comm/, stage timings of
 * the MegaMoE operator). */
#ifndef MEGAMOE_CORE_CLOCK_H
#define MEGAMOE_CORE_CLOCK_H

/* Seconds since an arbitrary fixed point (CLOCK_MONOTONIC); only differences mean anything. */
double mm_now_seconds(void);

#endif
