/* SPDX-License-Identifier: Apache-2.0 */
/* tests/test_threads_mega_moe.c: a MegaMoE call gives the same bits on 1, 2 and 3 pool threads, pinned
 * or not (megamoe/threads.h: results never depend on the thread count or the placement), for every
 * scenario of the table on 2 thread ranks with shared experts; the 1-thread result is also within the
 * scenario's tolerance of the float64 reference, so equal bits are right bits. */
#include <stdio.h>

#include "megamoe/threads.h"
#include "ops/mega_moe/scenario_table.h"
#include "test_mega_moe_common.h"

static size_t y_bytes(const moe_spec *sp, int r) {
    return (size_t)(sp->bs[r] * sp->hidden) * 2;
}

/* Runs the case with `threads` pool threads, pinned or not; 1 when it ran. */
static int run_with(moe_case *c, int threads, int pinned) {
    mm_error err;
    CHECK_OK(mm_threads_set_count(threads, &err), &err);
    CHECK_OK(mm_threads_set_pinning(pinned, &err), &err);
    for (int r = 0; r < c->sp.ranks; r++) memset(c->y[r], 0xA5, y_bytes(&c->sp, r)); /* stale bits */
    moe_run_arg arg;
    mm_status st = moe_case_run_ok(c, &arg);
    return st == MM_OK;
}

int main(void) {
    static const struct { int threads, pinned; } settings[] = {{2, 0}, {3, 0}, {2, 1}, {3, 1}};
    for (int q = 0; q < mm_moe_scenario_count; q++) {
        const mm_moe_scenario_row *sc = &mm_moe_scenario_table[q];
        moe_spec sp = moe_spec_large(sc, 700 + (uint64_t)q);
        moe_case c;
        if (!moe_case_build(&c, &sp)) continue;
        if (run_with(&c, 1, 0)) {
            char label[96];
            snprintf(label, sizeof label, "%s, 1 thread", sc->label);
            moe_case_check(&c, label);
            uint16_t *y1[2];
            int32_t *etn1[2];
            for (int r = 0; r < 2; r++) {
                y1[r] = malloc(y_bytes(&sp, r));
                memcpy(y1[r], c.y[r], y_bytes(&sp, r));
                etn1[r] = malloc(sizeof(int32_t) * 4);
                memcpy(etn1[r], c.etn[r], sizeof(int32_t) * 4);
            }
            for (size_t k = 0; k < sizeof settings / sizeof settings[0]; k++) {
                if (!run_with(&c, settings[k].threads, settings[k].pinned)) continue;
                int same = 1;
                for (int r = 0; r < 2; r++) {
                    same &= memcmp(y1[r], c.y[r], y_bytes(&sp, r)) == 0;
                    same &= memcmp(etn1[r], c.etn[r], sizeof(int32_t) * 4) == 0;
                }
                if (!same)
                    printf("  %s: %d threads%s differ from 1 thread\n", sc->label, settings[k].threads,
                           settings[k].pinned ? " (pinned)" : "");
                CHECK(same);
            }
            for (int r = 0; r < 2; r++) {
                free(y1[r]);
                free(etn1[r]);
            }
        }
        moe_case_free(&c);
    }
    mm_error err;
    CHECK_OK(mm_threads_set_pinning(0, &err), &err);
    return mm_test_finish("test_threads_mega_moe");
}
