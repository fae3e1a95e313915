/* SPDX-License-Identifier: Apache-2.0 */
/* tools/common/cli_svg.c: SVG primitives and axes for the charts of `--plot` (cli_svg.h). */
#include "common/cli_svg.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

static void put_escaped(FILE *out, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", out); break;
        case '<': fputs("&lt;", out); break;
        case '>': fputs("&gt;", out); break;
        case '"': fputs("&quot;", out); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\n') fputc(*s, out);
        }
    }
}

int cli_svg_open(cli_svg *s, const char *command, const char *path, double width, double height) {
    s->out = fopen(path, "w");
    s->width = width;
    s->height = height;
    if (!s->out) {
        cli_error(command, "--plot: cannot write '%s': %s", path, strerror(errno));
        return -1;
    }
    fprintf(s->out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%g\" height=\"%g\" "
            "viewBox=\"0 0 %g %g\" font-family=\"sans-serif\">\n"
            "<rect class=\"background\" x=\"0\" y=\"0\" width=\"%g\" height=\"%g\" fill=\"white\"/>\n",
            width, height, width, height, width, height);
    return 0;
}

int cli_svg_close(cli_svg *s, const char *command, const char *path) {
    fputs("</svg>\n", s->out);
    int bad = ferror(s->out);
    if (fclose(s->out) != 0) bad = 1;
    s->out = NULL;
    if (bad) cli_error(command, "--plot: writing '%s' failed", path);
    return bad ? -1 : 0;
}

void cli_svg_text(cli_svg *s, const char *cls, double x, double y, double size, const char *anchor,
                  double rotate, const char *fmt, ...) {
    char text[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof text, fmt, ap);
    va_end(ap);
    fprintf(s->out, "<text class=\"%s\" x=\"%.1f\" y=\"%.1f\" font-size=\"%g\" text-anchor=\"%s\"", cls, x, y,
            size, anchor);
    if (rotate != 0) fprintf(s->out, " transform=\"rotate(%g %.1f %.1f)\"", rotate, x, y);
    fputc('>', s->out);
    put_escaped(s->out, text);
    fputs("</text>\n", s->out);
}

void cli_svg_line(cli_svg *s, const char *cls, double x1, double y1, double x2, double y2, const char *color,
                  double width, const char *dash) {
    fprintf(s->out,
            "<line class=\"%s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
            "stroke-width=\"%g\"",
            cls, x1, y1, x2, y2, color, width);
    if (dash) fprintf(s->out, " stroke-dasharray=\"%s\"", dash);
    fputs("/>\n", s->out);
}

static void close_with_title(cli_svg *s, const char *element, const char *title) {
    if (!title) {
        fputs("/>\n", s->out);
        return;
    }
    fputs("><title>", s->out);
    put_escaped(s->out, title);
    fprintf(s->out, "</title></%s>\n", element);
}

void cli_svg_rect(cli_svg *s, const char *cls, double x, double y, double w, double h, const char *color,
                  const char *title) {
    fprintf(s->out, "<rect class=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"",
            cls, x, y, w, h, color);
    close_with_title(s, "rect", title);
}

void cli_svg_marker(cli_svg *s, const char *cls, double x, double y, int shape, const char *color,
                    const char *title) {
    const double r = 5;
    switch (shape % 4) {
    case 0:
        fprintf(s->out, "<circle class=\"%s\" cx=\"%.1f\" cy=\"%.1f\" r=\"%g\" fill=\"%s\" stroke=\"black\"",
                cls, x, y, r, color);
        close_with_title(s, "circle", title);
        break;
    case 1:
        fprintf(s->out,
                "<rect class=\"%s\" x=\"%.1f\" y=\"%.1f\" width=\"%g\" height=\"%g\" fill=\"%s\" "
                "stroke=\"black\"",
                cls, x - r, y - r, 2 * r, 2 * r, color);
        close_with_title(s, "rect", title);
        break;
    default: {
        double p[6];
        int n;
        if (shape % 4 == 2)
            n = 4, p[0] = x, p[1] = y - r * 1.3, p[2] = x + r * 1.3, p[3] = y, p[4] = x, p[5] = y + r * 1.3;
        else
            n = 3, p[0] = x, p[1] = y - r * 1.2, p[2] = x + r * 1.2, p[3] = y + r, p[4] = x - r * 1.2,
            p[5] = y + r;
        fprintf(s->out, "<polygon class=\"%s\" points=\"", cls);
        for (int i = 0; i < 3; i++) fprintf(s->out, "%.1f,%.1f ", p[2 * i], p[2 * i + 1]);
        if (n == 4) fprintf(s->out, "%.1f,%.1f", x - r * 1.3, y);
        fprintf(s->out, "\" fill=\"%s\" stroke=\"black\"", color);
        close_with_title(s, "polygon", title);
    }
    }
}

double cli_svg_map(const cli_svg_axis *a, double v) {
    double lo = a->log ? log10(a->lo) : a->lo, hi = a->log ? log10(a->hi) : a->hi;
    double t = a->log ? (v > 0 ? log10(v) : lo) : v;
    t = (t - lo) / (hi - lo);
    t = t < 0 ? 0 : t > 1 ? 1 : t;
    return a->p0 + t * (a->p1 - a->p0);
}

/* The linear tick step: 1, 2 or 5 times a power of ten, about 5 ticks over the range. */
static double linear_step(double span) {
    double raw = span / 5, p = pow(10, floor(log10(raw)));
    return raw / p <= 1 ? p : raw / p <= 2 ? 2 * p : raw / p <= 5 ? 5 * p : 10 * p;
}

/* The largest (down) or smallest (up) 1, 2 or 5 times a power of ten at or beyond v > 0. */
static double round_125(double v, int up) {
    static const double m[4] = {1, 2, 5, 10};
    double p = pow(10, floor(log10(v)));
    if (up) {
        for (int i = 0; i < 4; i++)
            if (m[i] * p >= v * (1 - 1e-9)) return m[i] * p;
        return 10 * p;
    }
    for (int i = 3; i >= 0; i--)
        if (m[i] * p <= v * (1 + 1e-9)) return m[i] * p;
    return p;
}

void cli_svg_axis_round(cli_svg_axis *a) {
    if (a->log) {
        a->lo = round_125(a->lo, 0);
        a->hi = round_125(a->hi, 1);
        if (a->hi <= a->lo) a->hi = a->lo * 10;
    } else {
        if (a->hi <= a->lo) a->hi = a->lo + 1;
        double step = linear_step(a->hi - a->lo);
        a->lo = floor(a->lo / step) * step;
        a->hi = ceil(a->hi / step) * step;
    }
}

/* Tick values of an axis, at most `max`. */
static int ticks(const cli_svg_axis *a, double *v, int max) {
    int n = 0;
    if (a->log) {
        /* 1-2-5 steps over up to 2.5 decades, else decades only */
        int fine = log10(a->hi / a->lo) <= 2.5;
        static const double m[3] = {1, 2, 5};
        for (double p = pow(10, floor(log10(a->lo))); p <= a->hi * 1.0001; p *= 10)
            for (int i = 0; i < (fine ? 3 : 1); i++)
                if (m[i] * p >= a->lo * 0.9999 && m[i] * p <= a->hi * 1.0001 && n < max) v[n++] = m[i] * p;
    } else {
        double step = linear_step(a->hi - a->lo);
        for (double t = a->lo; t <= a->hi + step * 1e-6 && n < max; t += step) v[n++] = t;
    }
    return n;
}

void cli_svg_axes(cli_svg *s, const cli_svg_axis *x, const cli_svg_axis *y, const char *x_label,
                  const char *y_label) {
    double v[32];
    int n = ticks(x, v, 32);
    for (int i = 0; i < n; i++) {
        double px = cli_svg_map(x, v[i]);
        cli_svg_line(s, "grid", px, y->p0, px, y->p1, "#dddddd", 1, NULL);
        cli_svg_text(s, "tick", px, y->p0 + 16, 11, "middle", 0, "%g", v[i]);
    }
    n = y_label ? ticks(y, v, 32) : 0;
    for (int i = 0; i < n; i++) {
        double py = cli_svg_map(y, v[i]);
        cli_svg_line(s, "grid", x->p0, py, x->p1, py, "#dddddd", 1, NULL);
        cli_svg_text(s, "tick", x->p0 - 6, py + 4, 11, "end", 0, "%g", v[i]);
    }
    fprintf(s->out,
            "<rect class=\"frame\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"none\" "
            "stroke=\"black\"/>\n",
            x->p0, y->p1, x->p1 - x->p0, y->p0 - y->p1);
    cli_svg_text(s, "axis-label", (x->p0 + x->p1) / 2, y->p0 + 38, 13, "middle", 0, "%s", x_label);
    if (y_label)
        cli_svg_text(s, "axis-label", x->p0 - 52, (y->p0 + y->p1) / 2, 13, "middle", -90, "%s", y_label);
}

const char *cli_svg_color(int n) {
    static const char *const palette[8] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728",
                                           "#9467bd", "#8c564b", "#e377c2", "#17becf"};
    return palette[((n % 8) + 8) % 8];
}
