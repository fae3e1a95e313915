/* SPDX-License-Identifier: Apache-2.0 */
/* tools/case/case_gen_mega_moe.h: the mega-moe generator of `megamoe case-gen` (case_gen_mega_moe.c). */
#ifndef MEGAMOE_TOOLS_CASE_GEN_MEGA_MOE_H
#define MEGAMOE_TOOLS_CASE_GEN_MEGA_MOE_H

/* argv[0] = "mega-moe"; returns the exit status. */
int mm_cli_case_gen_mega_moe(int argc, char **argv);

#endif
