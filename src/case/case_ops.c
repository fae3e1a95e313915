/* SPDX-License-Identifier: Apache-2.0 */
/* case/case_ops.c: the rows of the operator-adapter table. */
#include "case/case_ops.h"

#include <stdio.h>
#include <string.h>

static const mm_case_op *const case_ops[] = {
    &mm_case_op_re_routing,  &mm_case_op_mega_moe,   &mm_case_op_mega_moe_ext,
    &mm_case_op_dispatch_v3, &mm_case_op_combine_v2,
};
static const size_t case_op_count = sizeof case_ops / sizeof case_ops[0];

/* Every "op" value of the contract, including those whose adapters later issues add. */
static const char *const contract_ops[] = {"mega_moe", "moe_distribute_dispatch_v3",
                                           "moe_distribute_combine_add_rms_norm_v2", "moe_re_routing"};

const mm_case_op *mm_case_find_op(const char *name) {
    for (size_t i = 0; i < case_op_count; i++)
        if (strcmp(case_ops[i]->name, name) == 0) return case_ops[i];
    return NULL;
}

void mm_case_list_ops(char *buf, size_t cap) {
    size_t at = 0;
    if (cap == 0) return;
    buf[0] = '\0';
    for (size_t i = 0; i < case_op_count && at < cap; i++) {
        int n = snprintf(buf + at, cap - at, "%s%s", i ? ", " : "", case_ops[i]->name);
        if (n < 0) break;
        at += (size_t)n;
    }
}

int mm_case_is_contract_op(const char *name) {
    for (size_t i = 0; i < sizeof contract_ops / sizeof contract_ops[0]; i++)
        if (strcmp(contract_ops[i], name) == 0) return 1;
    return 0;
}
