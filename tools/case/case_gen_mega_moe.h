/* SPDX-License-Identifier: Apache-2.0 */
/* tools/case/case_gen_mega_moe.h: the mega-moe and mega-moe-ext generators of `megamoe case-gen`
 * (case_gen_mega_moe.c, case_gen_mega_moe_ext.c). */
#ifndef MEGAMOE_TOOLS_CASE_GEN_MEGA_MOE_H
#define MEGAMOE_TOOLS_CASE_GEN_MEGA_MOE_H

/* argv[0] = "mega-moe"; returns the exit status. */
int mm_cli_case_gen_mega_moe(int argc, char **argv);
/* argv[0] = "mega-moe-ext": the same generator writing op mega_moe_ext (checkpoint weight formats). */
int mm_cli_case_gen_mega_moe_ext(int argc, char **argv);

#endif
