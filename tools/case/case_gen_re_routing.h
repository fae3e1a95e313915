/* SPDX-License-Identifier: Apache-2.0 */
/* tools/case/case_gen_re_routing.h: the re-routing generator of `megamoe case-gen` (case_gen_re_routing.c).
 */
#ifndef MEGAMOE_TOOLS_CASE_GEN_RE_ROUTING_H
#define MEGAMOE_TOOLS_CASE_GEN_RE_ROUTING_H

/* argv[0] = "re-routing"; returns the exit status. */
int mm_cli_case_gen_re_routing(int argc, char **argv);

#endif
