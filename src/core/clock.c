/* SPDX-License-Identifier: Apache-2.0 */
/* core/clock.c: the monotonic clock (see clock.h). */
#include "core/clock.h"

#include <time.h>

double mm_now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
