/* SPDX-License-Identifier: Apache-2.0 */
/* The chart of the what-if: nodes medic holds disrupted over the trace,
 * the quarantined ones among them, and the fleet's caps, as SVG. */
#include "whatif.h"

#include <stdio.h>

#define NS_PER_DAY (86400.0 * 1e9)
#define W 900.0
#define H 320.0
#define LEFT 56.0
#define RIGHT 16.0
#define TOP 40.0
#define BOTTOM 44.0

struct frame {
    double days, top; /* the axes' ends */
};

static double x_of(const struct frame *f, double day)
{
    return LEFT + (W - LEFT - RIGHT) * (f->days > 0 ? day / f->days : 0);
}

static double y_of(const struct frame *f, double nodes)
{
    return H - BOTTOM - (H - TOP - BOTTOM) * nodes / f->top;
}

/* A step line (or, closed along the axis, an area) through the timeline:
 * which picks the quarantined nodes (1) or all disrupted ones (0). */
static void steps(const struct whatif_report *r, const struct frame *f, int which, int area,
                  struct medic_buf *out)
{
    medic_buf_printf(out, "M%.1f %.1f", x_of(f, 0), y_of(f, 0));
    for (size_t i = 0; i < r->point_count; i++) {
        const struct whatif_point *p = &r->timeline[i];
        double x = x_of(f, (double)p->at / NS_PER_DAY);
        double v = (double)(which ? p->quarantined : p->disrupted);
        medic_buf_printf(out, "H%.1fV%.1f", x, y_of(f, v));
    }
    medic_buf_printf(out, "H%.1f", x_of(f, f->days));
    if (area)
        medic_buf_printf(out, "V%.1fZ", y_of(f, 0));
}

static void axes(const struct frame *f, struct medic_buf *out)
{
    medic_buf_printf(out, "<path d=\"M%.1f %.1fV%.1fH%.1f\" fill=\"none\" stroke=\"#333\"/>\n",
                     LEFT, TOP, H - BOTTOM, W - RIGHT);
    double every = f->days > 400 ? 90 : f->days > 120 ? 30 : f->days > 20 ? 7 : 1;
    for (double d = 0; d <= f->days + 1e-9; d += every)
        medic_buf_printf(out, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n",
                         x_of(f, d), H - BOTTOM + 16, d);
    medic_buf_printf(out,
                     "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">day of the trace</text>\n",
                     (LEFT + W - RIGHT) / 2, H - 8);
    int step = f->top > 50 ? 10 : f->top > 20 ? 5 : f->top > 10 ? 2 : 1;
    for (int n = 0; n <= (int)f->top; n += step)
        medic_buf_printf(out,
                         "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%d</text>\n"
                         "<path d=\"M%.1f %.1fH%.1f\" stroke=\"#eee\"/>\n",
                         LEFT - 6, y_of(f, n) + 4, n, LEFT + 1, y_of(f, n), W - RIGHT);
    medic_buf_printf(out,
                     "<text x=\"14\" y=\"%.1f\" transform=\"rotate(-90 14 %.1f)\" "
                     "text-anchor=\"middle\">nodes</text>\n",
                     (TOP + H - BOTTOM) / 2, (TOP + H - BOTTOM) / 2);
}

static void cap_line(const struct frame *f, const struct whatif_cap *c, const char *colour,
                     const char *label, struct medic_buf *out)
{
    double y = y_of(f, (double)c->limit);
    medic_buf_printf(out,
                     "<path d=\"M%.1f %.1fH%.1f\" stroke=\"%s\" stroke-dasharray=\"6 4\"/>\n"
                     "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" fill=\"%s\">%s: %zu</text>\n",
                     LEFT, y, W - RIGHT, colour, W - RIGHT - 4, y - 4, colour, label, c->limit);
}

int whatif_chart_svg(const struct whatif_report *r, struct medic_buf *out)
{
    struct frame f = {(double)r->span / NS_PER_DAY, 1};
    for (size_t i = 0; i < r->point_count; i++)
        if ((double)r->timeline[i].disrupted > f.top)
            f.top = (double)r->timeline[i].disrupted;
    for (size_t i = 0; i < 2 && i < r->cap_count; i++)
        if ((double)r->caps[i].limit > f.top)
            f.top = (double)r->caps[i].limit;
    f.top += 1;
    medic_buf_printf(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
        "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
        "<rect width=\"100%%\" height=\"100%%\" fill=\"#fff\"/>\n"
        "<text x=\"%.1f\" y=\"20\" font-size=\"14\">Nodes medic would hold "
        "disrupted: %zu faults, %zu disruptions over %.0f days, %zu of %zu nodes</text>\n",
        W, H, W, H, LEFT, r->faults, r->disruptions, f.days, r->nodes, r->fleet);
    axes(&f, out);
    medic_buf_puts(out, "<path d=\"");
    steps(r, &f, 1, 1, out);
    medic_buf_puts(out, "\" fill=\"#f4a261\" stroke=\"none\"/>\n<path d=\"");
    steps(r, &f, 0, 0, out);
    medic_buf_puts(out, "\" fill=\"none\" stroke=\"#1d3557\" stroke-width=\"1.5\"/>\n");
    if (r->cap_count >= 2) {
        cap_line(&f, &r->caps[1], "#c1121f", "max_disrupted_fraction", out);
        cap_line(&f, &r->caps[0], "#2a9d8f", "max_disruptive_in_flight (repairs)", out);
    }
    medic_buf_printf(out,
                     "<text x=\"%.1f\" y=\"%.1f\" fill=\"#1d3557\">disrupted nodes</text>\n"
                     "<text x=\"%.1f\" y=\"%.1f\" fill=\"#e76f51\">quarantined (waiting for "
                     "a person)</text>\n</svg>\n",
                     LEFT + 8, TOP - 4, LEFT + 140, TOP - 4);
    return out->len ? 0 : MEDIC_E_NOMEM;
}
