/* SPDX-License-Identifier: Apache-2.0 */
/* tools/bench/bench_ffn_plot.c: `bench ffn --plot FILE.svg`: the roofline of the measured FFN rows. x is
 * the arithmetic intensity (FLOPs per weight byte, which grows with the rows per expert), y the achieved
 * GFLOP/s with N threads, both logarithmic; the peak loops of the BF16 (vdpbf16ps) and INT8 (vpdpbusd)
 * dot instructions are horizontal lines, the streaming-read bandwidth the slanted line y = bandwidth x.
 * A point under the slanted line is bound by reading its weights, one under a horizontal line by the
 * arithmetic; the distance to the lower of the two is what a kernel leaves. */
#include <math.h>
#include <stdio.h>

#include "bench/bench_ffn.h"
#include "common/cli_json.h"
#include "common/cli_svg.h"

void bench_ffn_plot_add(bench_ffn_plot *p, bench_ffn_point point) {
    if (p->count < (int)(sizeof p->points / sizeof p->points[0])) p->points[p->count++] = point;
}

static void legend_line(cli_svg *s, double x, double y, const char *cls, const char *color, const char *dash,
                        const char *text) {
    cli_svg_line(s, cls, x, y, x + 24, y, color, 2, dash);
    cli_svg_text(s, "legend", x + 30, y + 4, 12, "start", 0, "%s", text);
}

int bench_ffn_plot_write(const bench_ffn_plot *p) {
    const char *cmd = "bench ffn";
    const double W = 1060, H = 620, left = 90, right = 310, top = 56, bottom = 64;
    cli_svg_axis x = {INFINITY, 0, 1, left, W - right}, y = {INFINITY, 0, 1, H - bottom, top};
    for (int i = 0; i < p->count; i++) {
        x.lo = fmin(x.lo, p->points[i].intensity), x.hi = fmax(x.hi, p->points[i].intensity);
        y.lo = fmin(y.lo, p->points[i].flops / 1e9), y.hi = fmax(y.hi, p->points[i].flops / 1e9);
    }
    const double peaks[2] = {p->peak_bf16 / 1e9, p->peak_int8 / 1e9};
    for (int k = 0; k < 2; k++)
        if (peaks[k] > 0) {
            y.hi = fmax(y.hi, peaks[k] * 1.2);
            if (p->bandwidth > 0) x.hi = fmax(x.hi, peaks[k] * 1e9 / p->bandwidth * 2); /* the ridge points */
        }
    if (p->count == 0) x.lo = 1, x.hi = fmax(x.hi, 10), y.lo = 1, y.hi = fmax(y.hi, 10);
    /* a margin, so that no marker sits on the frame */
    x.lo /= 1.25, x.hi *= 1.25, y.lo /= 1.25, y.hi *= 1.25;
    cli_svg_axis_round(&x);
    cli_svg_axis_round(&y);

    cli_svg s;
    if (cli_svg_open(&s, cmd, p->path, W, H) != 0) return -1;
    char cpu[256];
    cli_cpu_model(cpu, sizeof cpu);
    cli_svg_text(&s, "title", W / 2, 28, 16, "middle", 0, "megamoe bench ffn roofline: %s, %d thread%s",
                 cpu[0] ? cpu : "CPU", p->threads, cli_plural_s(p->threads));
    char y_label[96];
    snprintf(y_label, sizeof y_label, "achieved GFLOP/s (int8: GOP/s) on %d thread%s", p->threads,
             cli_plural_s(p->threads));
    cli_svg_axes(&s, &x, &y, "arithmetic intensity (FLOPs per weight byte)", y_label);

    /* The ceilings: peak loops (horizontal) and streaming bandwidth (slanted, clipped to the plot). */
    static const char *const peak_cls[2] = {"peak-bf16", "peak-int8"}, *const peak_color[2] = {"#444444",
                                                                                               "#888888"};
    static const char *const peak_dash[2] = {"8 4", "2 3"};
    for (int k = 0; k < 2; k++)
        if (peaks[k] > 0) {
            double py = cli_svg_map(&y, peaks[k]);
            cli_svg_line(&s, peak_cls[k], x.p0, py, x.p1, py, peak_color[k], 2, peak_dash[k]);
        }
    if (p->bandwidth > 0) {
        double gbs = p->bandwidth / 1e9;
        double x0 = fmax(x.lo, y.lo / gbs), x1 = fmin(x.hi, y.hi / gbs);
        if (x1 > x0)
            cli_svg_line(&s, "bandwidth", cli_svg_map(&x, x0), cli_svg_map(&y, x0 * gbs), cli_svg_map(&x, x1),
                         cli_svg_map(&y, x1 * gbs), "#b22222", 2, NULL);
    }

    /* One marker per measured point: color and shape by format, its rows beside it. */
    for (int i = 0; i < p->count; i++) {
        const bench_ffn_point *q = &p->points[i];
        double px = cli_svg_map(&x, q->intensity), py = cli_svg_map(&y, q->flops / 1e9);
        char title[160];
        snprintf(title, sizeof title, "%s, H %lld, %lld row%s: %.1f flop/byte, %.1f GFLOP/s",
                 bench_ffn_format_name(q->format), (long long)q->hidden, (long long)q->rows,
                 cli_plural_s(q->rows), q->intensity, q->flops / 1e9);
        cli_svg_marker(&s, "point", px, py, (int)q->format, cli_svg_color((int)q->format), title);
        if (p->n_hidden > 1)
            cli_svg_text(&s, "point-label", px + 8, py - 6, 10, "start", 0, "%lld (H %lld)",
                         (long long)q->rows, (long long)q->hidden);
        else
            cli_svg_text(&s, "point-label", px + 8, py - 6, 10, "start", 0, "%lld", (long long)q->rows);
    }

    /* Legend: the formats present, then the ceilings with their values. */
    double lx = W - right + 20, ly = top + 10;
    cli_svg_text(&s, "legend-title", lx, ly, 12, "start", 0, "format (label: rows per expert)");
    int seen[FFN_FORMAT_COUNT] = {0};
    for (int i = 0; i < p->count; i++) {
        bench_ffn_format f = p->points[i].format;
        if (seen[f]++) continue;
        ly += 20;
        cli_svg_marker(&s, "legend-marker", lx + 12, ly, (int)f, cli_svg_color((int)f), NULL);
        cli_svg_text(&s, "legend", lx + 30, ly + 4, 12, "start", 0, "%s", bench_ffn_format_name(f));
    }
    ly += 30;
    char text[96];
    for (int k = 0; k < 2; k++)
        if (peaks[k] > 0) {
            snprintf(text, sizeof text, "%s peak %.0f G%s/s", k ? "int8 vpdpbusd" : "bf16 vdpbf16ps",
                     peaks[k], k ? "OP" : "FLOP");
            legend_line(&s, lx, ly, "legend-line", peak_color[k], peak_dash[k], text);
            ly += 20;
        }
    if (p->bandwidth > 0) {
        snprintf(text, sizeof text, "streaming read %.1f GB/s", p->bandwidth / 1e9);
        legend_line(&s, lx, ly, "legend-line", "#b22222", NULL, text);
    }
    return cli_svg_close(&s, cmd, p->path);
}
