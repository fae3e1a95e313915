/* SPDX-License-Identifier: Apache-2.0 */
/* tools/case/case_gen_dispatch_combine.h: the dispatch-v3 and combine-v2 generators of `megamoe case-gen`
 * (case_gen_dispatch_combine.c). */
#ifndef MEGAMOE_TOOLS_CASE_GEN_DISPATCH_COMBINE_H
#define MEGAMOE_TOOLS_CASE_GEN_DISPATCH_COMBINE_H

/* argv[0] = the generator name; return the exit status. */
int mm_cli_case_gen_dispatch_v3(int argc, char **argv);
int mm_cli_case_gen_combine_v2(int argc, char **argv);

#endif
