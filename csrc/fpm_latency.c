/* The FPM latency model (spec 06 R-27 ... R-31).  Mirrors
 * src/fpmcore/replay/latency.py function by function: both must round alike
 * (the build turns off fused multiply-add).  The reference interpolates every
 * knot of the table; here the rows are grouped once (lin_prepare) and a step
 * interpolates only the knots around its point, by the same operations, and
 * takes the other knots' extrapolation flags by comparison with their ends. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fpm_internal.h"

/* R-28, where lin evaluates a segment: the segment of knots xs[0 .. m) (m >= 2, increasing) that
 * holds x, the end segments outside.  Inside, the first i with xs[i] <= x <= xs[i + 1]: found by
 * bisection as the first j >= 1 with x <= xs[j], less one, which is the same segment. */
static int64_t segment(double x, const double *xs, int64_t m) {
    if (x <= xs[0]) return 0;
    if (x >= xs[m - 1]) return m - 2;
    int64_t lo = 1, hi = m - 1;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (x <= xs[mid])
            hi = mid;
        else
            lo = mid + 1;
    }
    return lo - 1;
}

/* R-28's value on the segment from (xa, ya) to (xb, yb) */
static inline double on_segment(double x, double xa, double ya, double xb, double yb) {
    return ya + (yb - ya) * (x - xa) / (xb - xa);
}

/* R-28's extrapolation flag alone: x outside the knots xs[0 .. m) (none for a single knot) */
static inline void flag(lin_ctx *lc, double x, const double *xs, int64_t m) {
    if (m > 1 && (x < xs[0] || x > xs[m - 1])) lc->extrapolated = 1;
}

/* */
static double lin(lin_ctx *lc, double x, const double *xs, const double *ys, int64_t m) {
    if (m == 1) return ys[0];
    flag(lc, x, xs, m);
    int64_t i = segment(x, xs, m);
    return on_segment(x, xs[i], ys[i], xs[i + 1], ys[i + 1]);
}

/* R-29's interpolation over the prefill-token groups of batch-size group g at (tt, kk): each group's
 * knot is its rows' interpolation at kk, so only the groups around tt are interpolated. */
static double prefill_slice(lin_ctx *lc, int64_t g, double tt, double kk) {
    const double *tx = &lc->p_tj[lc->p_start[g]];
    const int64_t *rows = &lc->p_rows[lc->p_start[g]];
    int64_t nt = lc->p_start[g + 1] - lc->p_start[g];
#define TKNOT(j) lin(lc, kk, &lc->p_x[rows[j]], &lc->p_y[rows[j]], rows[(j) + 1] - rows[j])
    if (nt == 1) return TKNOT(0);
    flag(lc, tt, tx, nt);
    int64_t i = segment(tt, tx, nt);
    double ya = TKNOT(i), yb = TKNOT(i + 1);
#undef TKNOT
    return on_segment(tt, tx[i], ya, tx[i + 1], yb);
}

/* lin over the batch sizes of lin over the prefill tokens of lin over the KV read tokens.  The
 * value needs the knots around each point only; the flag of every lin R-29 evaluates is taken too. */
static double prefill_time(lin_ctx *lc, int64_t b, int64_t t, int64_t k) {
    double nbar = (double)t / (double)b, pbar = (double)k / (double)b, x = (double)b, v;
    int64_t n = lc->np;
    if (n == 1) {
        v = prefill_slice(lc, 0, lc->p_beta[0] * nbar, lc->p_beta[0] * pbar);
    } else {
        flag(lc, x, lc->p_beta, n);
        int64_t i = segment(x, lc->p_beta, n);
        double ya = prefill_slice(lc, i, lc->p_beta[i] * nbar, lc->p_beta[i] * pbar);
        double yb = prefill_slice(lc, i + 1, lc->p_beta[i + 1] * nbar, lc->p_beta[i + 1] * pbar);
        v = on_segment(x, lc->p_beta[i], ya, lc->p_beta[i + 1], yb);
    }
    for (int64_t g = 0; g < n && !lc->extrapolated; g++) {
        double tt = lc->p_beta[g] * nbar, kk = lc->p_beta[g] * pbar;
        if (tt < lc->p_tlo[g] || tt > lc->p_thi[g]) lc->extrapolated = 1;
        for (int64_t j = lc->p_start[g]; j < lc->p_start[g + 1]; j++)
            if (kk < lc->p_klo[j] || kk > lc->p_khi[j]) lc->extrapolated = 1;
    }
    return v;
}

/* lin over the batch sizes of lin over the KV read tokens; as prefill_time, the knots around
 * the point and the flags of every lin. */
static double decode_time(lin_ctx *lc, int64_t d, int64_t k) {
    double cbar = (double)k / (double)d, x = (double)d, v;
    int64_t n = lc->nd;
#define SLICE(g) lin(lc, lc->d_beta[g] * cbar, &lc->d_x[lc->d_start[g]], &lc->d_y[lc->d_start[g]], \
                     lc->d_start[(g) + 1] - lc->d_start[g])
    if (n == 1) {
        v = SLICE(0);
    } else {
        flag(lc, x, lc->d_beta, n);
        int64_t i = segment(x, lc->d_beta, n);
        double ya = SLICE(i), yb = SLICE(i + 1);
        v = on_segment(x, lc->d_beta[i], ya, lc->d_beta[i + 1], yb);
    }
#undef SLICE
    if (!lc->extrapolated) {
        for (int64_t g = 0; g < n; g++) {
            double kk = lc->d_beta[g] * cbar;
            if (kk < lc->d_lo[g] || kk > lc->d_hi[g]) {
                lc->extrapolated = 1;
                break;
            }
        }
    }
    return v;
}

/* R-31; a step with both phases pays the shared step cost once (RD-16):
 * P + D - min(S, P, D), S = lc->shared (0: P + D). */
void step_time(lin_ctx *lc, int64_t np, int64_t pt, int64_t pkv, int64_t nd, int64_t dkv, double *sec,
               int32_t *extra, int32_t *missing) {
    double total = 0.0, pv = 0.0;
    lc->extrapolated = 0;
    *missing = -1;
    if (np > 0) {
        if (lc->np == 0) {
            *missing = 0;
            return;
        }
        double v = prefill_time(lc, np, pt, pkv);
        if (v < lc->p_floor) {
            v = lc->p_floor;
            lc->extrapolated = 1;
        }
        total += v;
        pv = v;
    }
    if (nd > 0) {
        if (lc->nd == 0) {
            *missing = 1;
            return;
        }
        double v = decode_time(lc, nd, dkv);
        if (v < lc->d_floor) {
            v = lc->d_floor;
            lc->extrapolated = 1;
        }
        total += v;
        if (np > 0 && lc->shared > 0.0) {
            double s = lc->shared;
            if (pv < s) s = pv;
            if (v < s) s = v;
            total -= s;
        }
    }
    *sec = total;
    *extra = lc->extrapolated;
}

/* rows in range and sorted (the host validates them with diagnostics). */
int table_ok(const fpm_replay_config *cfg) {
    if (cfg->nprefill < 0 || cfg->ndecode < 0) return 0;
    if (!(cfg->shared_step_seconds >= 0.0) || !isfinite(cfg->shared_step_seconds)) return 0;
    if (cfg->nprefill > 0 && cfg->prefill == NULL) return 0;
    if (cfg->ndecode > 0 && cfg->decode == NULL) return 0;
    for (int64_t i = 0; i < cfg->nprefill; i++) {
        const fpm_prefill_row *r = &cfg->prefill[i];
        if (r->batch_size < 1 || r->total_prefill_tokens < 0 || r->total_kv_read_tokens < 0 ||
            !(r->wall_time > 0.0) || !isfinite(r->wall_time))
            return 0;
        if (i > 0) {
            const fpm_prefill_row *p = &cfg->prefill[i - 1];
            if (p->batch_size > r->batch_size ||
                (p->batch_size == r->batch_size && p->total_prefill_tokens > r->total_prefill_tokens) ||
                (p->batch_size == r->batch_size && p->total_prefill_tokens == r->total_prefill_tokens &&
                 p->total_kv_read_tokens >= r->total_kv_read_tokens))
                return 0;
        }
    }
    for (int64_t i = 0; i < cfg->ndecode; i++) {
        const fpm_decode_row *r = &cfg->decode[i];
        if (r->batch_size < 1 || r->total_kv_read_tokens < 0 || !(r->wall_time > 0.0) || !isfinite(r->wall_time))
            return 0;
        if (i > 0) {
            const fpm_decode_row *p = &cfg->decode[i - 1];
            if (p->batch_size > r->batch_size ||
                (p->batch_size == r->batch_size && p->total_kv_read_tokens >= r->total_kv_read_tokens))
                return 0;
        }
    }
    return 1;
}

/* The range outside which lin over the knots xs[0 .. m) flags its point: none for a single knot. */
static void knot_range(const double *xs, int64_t m, double *lo, double *hi) {
    *lo = m > 1 ? xs[0] : -INFINITY;
    *hi = m > 1 ? xs[m - 1] : INFINITY;
}

int lin_prepare(lin_ctx *lc, const fpm_replay_config *cfg) {
    int64_t nd = 0, np = 0, nt = 0;
    for (int64_t i = 0; i < cfg->ndecode; i++) nd += i == 0 || cfg->decode[i].batch_size != cfg->decode[i - 1].batch_size;
    for (int64_t i = 0; i < cfg->nprefill; i++) {
        const fpm_prefill_row *r = &cfg->prefill[i], *q = i > 0 ? &cfg->prefill[i - 1] : NULL;
        int new_beta = q == NULL || r->batch_size != q->batch_size;
        np += new_beta;
        nt += new_beta || r->total_prefill_tokens != q->total_prefill_tokens;
    }
    lc->shared = cfg->shared_step_seconds;
    lc->nd = nd;
    lc->np = np;
    lc->d_beta = fpm_calloc(nd + 1, sizeof(double));
    lc->d_start = fpm_calloc(nd + 1, sizeof(int64_t));
    lc->d_x = fpm_calloc(cfg->ndecode + 1, sizeof(double));
    lc->d_y = fpm_calloc(cfg->ndecode + 1, sizeof(double));
    lc->p_beta = fpm_calloc(np + 1, sizeof(double));
    lc->p_start = fpm_calloc(np + 1, sizeof(int64_t));
    lc->p_tj = fpm_calloc(nt + 1, sizeof(double));
    lc->p_rows = fpm_calloc(nt + 1, sizeof(int64_t));
    lc->p_x = fpm_calloc(cfg->nprefill + 1, sizeof(double));
    lc->p_y = fpm_calloc(cfg->nprefill + 1, sizeof(double));
    lc->d_lo = fpm_calloc(nd + 1, sizeof(double));
    lc->d_hi = fpm_calloc(nd + 1, sizeof(double));
    lc->p_tlo = fpm_calloc(np + 1, sizeof(double));
    lc->p_thi = fpm_calloc(np + 1, sizeof(double));
    lc->p_klo = fpm_calloc(nt + 1, sizeof(double));
    lc->p_khi = fpm_calloc(nt + 1, sizeof(double));
    if (!lc->d_beta || !lc->d_start || !lc->d_x || !lc->d_y || !lc->p_beta || !lc->p_start || !lc->p_tj ||
        !lc->p_rows || !lc->p_x || !lc->p_y || !lc->d_lo || !lc->d_hi || !lc->p_tlo || !lc->p_thi || !lc->p_klo ||
        !lc->p_khi) {
        lin_free(lc);
        return 0;
    }
    int64_t g = 0;
    for (int64_t i = 0; i < cfg->ndecode; i++) {
        const fpm_decode_row *r = &cfg->decode[i];
        if (i == 0 || r->batch_size != cfg->decode[i - 1].batch_size) {
            lc->d_beta[g] = (double)r->batch_size;
            lc->d_start[g++] = i;
        }
        lc->d_x[i] = (double)r->total_kv_read_tokens;
        lc->d_y[i] = r->wall_time;
        if (i == 0 || r->wall_time < lc->d_floor) lc->d_floor = r->wall_time;
    }
    lc->d_start[nd] = cfg->ndecode;
    int64_t b = 0, t = 0;
    for (int64_t i = 0; i < cfg->nprefill; i++) {
        const fpm_prefill_row *r = &cfg->prefill[i], *q = i > 0 ? &cfg->prefill[i - 1] : NULL;
        int new_beta = q == NULL || r->batch_size != q->batch_size;
        if (new_beta) {
            lc->p_beta[b] = (double)r->batch_size;
            lc->p_start[b++] = t;
        }
        if (new_beta || r->total_prefill_tokens != q->total_prefill_tokens) {
            lc->p_tj[t] = (double)r->total_prefill_tokens;
            lc->p_rows[t++] = i;
        }
        lc->p_x[i] = (double)r->total_kv_read_tokens;
        lc->p_y[i] = r->wall_time;
        if (i == 0 || r->wall_time < lc->p_floor) lc->p_floor = r->wall_time;
    }
    lc->p_start[np] = nt;
    lc->p_rows[nt] = cfg->nprefill;
    for (g = 0; g < nd; g++) knot_range(&lc->d_x[lc->d_start[g]], lc->d_start[g + 1] - lc->d_start[g], &lc->d_lo[g], &lc->d_hi[g]);
    for (b = 0; b < np; b++)
        knot_range(&lc->p_tj[lc->p_start[b]], lc->p_start[b + 1] - lc->p_start[b], &lc->p_tlo[b], &lc->p_thi[b]);
    for (t = 0; t < nt; t++) knot_range(&lc->p_x[lc->p_rows[t]], lc->p_rows[t + 1] - lc->p_rows[t], &lc->p_klo[t], &lc->p_khi[t]);
    return 1;
}

void lin_free(lin_ctx *lc) {
    free(lc->d_beta);
    free(lc->d_start);
    free(lc->d_x);
    free(lc->d_y);
    free(lc->p_beta);
    free(lc->p_start);
    free(lc->p_tj);
    free(lc->p_rows);
    free(lc->p_x);
    free(lc->p_y);
    free(lc->d_lo);
    free(lc->d_hi);
    free(lc->p_tlo);
    free(lc->p_thi);
    free(lc->p_klo);
    free(lc->p_khi);
    memset(lc, 0, sizeof *lc);
}

fpm_status fpm_step_time(const fpm_replay_config *cfg, int64_t np, int64_t pt, int64_t pkv, int64_t nd,
                         int64_t dkv, double *seconds, int32_t *extrapolated, int32_t *missing_phase) {
    if (cfg == NULL || seconds == NULL || extrapolated == NULL || missing_phase == NULL) return FPM_EINVAL;
    if (np < 0 || nd < 0 || pt < 0 || pkv < 0 || dkv < 0 || !table_ok(cfg)) return FPM_EINVAL;
    lin_ctx lc;
    memset(&lc, 0, sizeof lc);
    if (!lin_prepare(&lc, cfg)) return FPM_ENOMEM;
    *seconds = 0.0;
    *extrapolated = 0;
    step_time(&lc, np, pt, pkv, nd, dkv, seconds, extrapolated, missing_phase);
    lin_free(&lc);
    return FPM_OK;
}
