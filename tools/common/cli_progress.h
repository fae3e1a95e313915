/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/cli_progress.h: a progress line for the long silent phases of a command (generating and
 * packing weights, the reference check): "\r<what> 3.1 s" on stderr, redrawn in place by a ticker
 * thread, and erased when the phase ends. Only on a terminal: nothing when stderr is not a TTY (scripts,
 * tests, logs keep exactly their output) or after cli_progress_quiet(). */
#ifndef MEGAMOE_TOOLS_CLI_PROGRESS_H
#define MEGAMOE_TOOLS_CLI_PROGRESS_H

#include "common/cli_util.h"

/* --quiet: no progress line for the rest of the command. */
void cli_progress_quiet(void);
/* Starts showing the phase (a formatted label); one phase at a time. */
void cli_progress_begin(const char *fmt, ...) MM_CLI_PRINTF(1, 2);
/* Stops the ticker and erases the line (nothing when no phase is shown). */
void cli_progress_end(void);

#endif
