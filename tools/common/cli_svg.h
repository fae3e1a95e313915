/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/cli_svg.h: the SVG charts of `--plot FILE.svg` (bench ffn's roofline, bench mega-moe's
 * stage bars), drawn by the program itself: a few primitives that write SVG 1.1 elements, and axes with
 * linear or logarithmic scales. Every element carries a class naming what it is ("point", "axis-label",
 * ...), so that a test can find the parts of a chart and a stylesheet can restyle them. Text is
 * escaped for XML. */
#ifndef MEGAMOE_TOOLS_CLI_SVG_H
#define MEGAMOE_TOOLS_CLI_SVG_H

#include <stdio.h>

#include "common/cli_util.h"

typedef struct cli_svg {
    FILE *out;
    double width, height;
} cli_svg;

/* Opens `path` for writing and writes the <svg> element and a white background; 0, or -1 after one
 * error line naming `command`. */
int cli_svg_open(cli_svg *s, const char *command, const char *path, double width, double height);
/* Closes the document; 0, or -1 after one error line when the file could not be written. */
int cli_svg_close(cli_svg *s, const char *command, const char *path);

/* anchor: "start", "middle" or "end"; rotate: degrees around (x, y) (0: none). */
void cli_svg_text(cli_svg *s, const char *cls, double x, double y, double size, const char *anchor,
                  double rotate, const char *fmt, ...) MM_CLI_PRINTF(8, 9);
/* dash NULL: a solid line. */
void cli_svg_line(cli_svg *s, const char *cls, double x1, double y1, double x2, double y2, const char *color,
                  double width, const char *dash);
/* title: a tooltip (<title>), NULL for none. */
void cli_svg_rect(cli_svg *s, const char *cls, double x, double y, double w, double h, const char *color,
                  const char *title);
/* A marker: shape 0 circle, 1 square, 2 diamond, 3 triangle (then again), with a tooltip. */
void cli_svg_marker(cli_svg *s, const char *cls, double x, double y, int shape, const char *color,
                    const char *title);

/* One axis of a chart: values lo..hi drawn on pixels p0..p1, logarithmic or linear. */
typedef struct cli_svg_axis {
    double lo, hi;
    int log;
    double p0, p1;
} cli_svg_axis;

/* The pixel of value v (clamped to the axis). */
double cli_svg_map(const cli_svg_axis *a, double v);
/* Widens [lo, hi] to 1, 2 or 5 times a power of ten (log) or to a round step (linear). */
void cli_svg_axis_round(cli_svg_axis *a);
/* The frame of the plot area, ticks and grid (on a log axis 1, 2, 5 per decade over up to 2.5 decades,
 * else decades; 1-2-5 steps on a linear one) and the axis labels; y_label NULL: no y ticks or label (bars
 * whose rows are labelled instead). The y axis's p0 is the bottom pixel. */
void cli_svg_axes(cli_svg *s, const cli_svg_axis *x, const cli_svg_axis *y, const char *x_label,
                  const char *y_label);

/* The n-th color of a qualitative palette (repeats after 8). */
const char *cli_svg_color(int n);

#endif
