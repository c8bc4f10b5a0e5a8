/* The FPM latency model (spec 06 R-27 ... R-31).  Mirrors
 * src/fpmcore/replay/latency.py function by function: both must round alike
 * (the build turns off fused multiply-add). */
#include <math.h>
#include <stdlib.h>

#include "fpm_internal.h"

/* */
static double lin(lin_ctx *lc, double x, const double *xs, const double *ys, int64_t m) {
    if (m == 1) return ys[0];
    if (x < xs[0] || x > xs[m - 1]) lc->extrapolated = 1;
    int64_t i;
    if (x <= xs[0]) {
        i = 0;
    } else if (x >= xs[m - 1]) {
        i = m - 2;
    } else {
        i = 0;
        while (!(xs[i] <= x && x <= xs[i + 1])) i++;
    }
    double xa = xs[i], ya = ys[i], xb = xs[i + 1], yb = ys[i + 1];
    return ya + (yb - ya) * (x - xa) / (xb - xa);
}

/* */
static double prefill_time(const fpm_replay_config *cfg, lin_ctx *lc, int64_t b, int64_t t, int64_t k) {
    double nbar = (double)t / (double)b, pbar = (double)k / (double)b;
    const fpm_prefill_row *rows = cfg->prefill;
    int64_t n = cfg->nprefill, i = 0, nb = 0;
    while (i < n) {
        int64_t beta = rows[i].batch_size;
        double tt = (double)beta * nbar, kk = (double)beta * pbar;
        int64_t nt = 0;
        while (i < n && rows[i].batch_size == beta) {
            int64_t tj = rows[i].total_prefill_tokens, nk = 0;
            while (i < n && rows[i].batch_size == beta && rows[i].total_prefill_tokens == tj) {
                lc->kx[nk] = (double)rows[i].total_kv_read_tokens;
                lc->ky[nk] = rows[i].wall_time;
                nk++;
                i++;
            }
            lc->tx[nt] = (double)tj;
            lc->ty[nt] = lin(lc, kk, lc->kx, lc->ky, nk);
            nt++;
        }
        lc->bx[nb] = (double)beta;
        lc->by[nb] = lin(lc, tt, lc->tx, lc->ty, nt);
        nb++;
    }
    return lin(lc, (double)b, lc->bx, lc->by, nb);
}

/* */
static double decode_time(const fpm_replay_config *cfg, lin_ctx *lc, int64_t d, int64_t k) {
    double cbar = (double)k / (double)d;
    const fpm_decode_row *rows = cfg->decode;
    int64_t n = cfg->ndecode, i = 0, nb = 0;
    while (i < n) {
        int64_t beta = rows[i].batch_size, nk = 0;
        double kk = (double)beta * cbar;
        while (i < n && rows[i].batch_size == beta) {
            lc->kx[nk] = (double)rows[i].total_kv_read_tokens;
            lc->ky[nk] = rows[i].wall_time;
            nk++;
            i++;
        }
        lc->bx[nb] = (double)beta;
        lc->by[nb] = lin(lc, kk, lc->kx, lc->ky, nk);
        nb++;
    }
    return lin(lc, (double)d, lc->bx, lc->by, nb);
}

/* R-31; a step with both phases pays the shared step cost once (RD-16):
 * P + D - min(S, P, D), S = cfg->shared_step_seconds (0: P + D). */
void step_time(const fpm_replay_config *cfg, lin_ctx *lc, int64_t np, int64_t pt, int64_t pkv, int64_t nd,
               int64_t dkv, double *sec, int32_t *extra, int32_t *missing) {
    double total = 0.0, pv = 0.0;
    lc->extrapolated = 0;
    *missing = -1;
    if (np > 0) {
        if (cfg->nprefill == 0) {
            *missing = 0;
            return;
        }
        double v = prefill_time(cfg, lc, np, pt, pkv), fl = cfg->prefill[0].wall_time;
        for (int64_t i = 1; i < cfg->nprefill; i++)
            if (cfg->prefill[i].wall_time < fl) fl = cfg->prefill[i].wall_time;
        if (v < fl) {
            v = fl;
            lc->extrapolated = 1;
        }
        total += v;
        pv = v;
    }
    if (nd > 0) {
        if (cfg->ndecode == 0) {
            *missing = 1;
            return;
        }
        double v = decode_time(cfg, lc, nd, dkv), fl = cfg->decode[0].wall_time;
        for (int64_t i = 1; i < cfg->ndecode; i++)
            if (cfg->decode[i].wall_time < fl) fl = cfg->decode[i].wall_time;
        if (v < fl) {
            v = fl;
            lc->extrapolated = 1;
        }
        total += v;
        if (np > 0 && cfg->shared_step_seconds > 0.0) {
            double s = cfg->shared_step_seconds;
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

int lin_alloc(lin_ctx *lc, int64_t n) {
    if (n < 1) n = 1;
    double *mem = fpm_calloc(n, 6 * sizeof(double));
    if (mem == NULL) return 0;
    lc->kx = mem;
    lc->ky = mem + n;
    lc->tx = mem + 2 * n;
    lc->ty = mem + 3 * n;
    lc->bx = mem + 4 * n;
    lc->by = mem + 5 * n;
    return 1;
}

void lin_free(lin_ctx *lc) {
    free(lc->kx);
    lc->kx = NULL;
}

fpm_status fpm_step_time(const fpm_replay_config *cfg, int64_t np, int64_t pt, int64_t pkv, int64_t nd,
                         int64_t dkv, double *seconds, int32_t *extrapolated, int32_t *missing_phase) {
    if (cfg == NULL || seconds == NULL || extrapolated == NULL || missing_phase == NULL) return FPM_EINVAL;
    if (np < 0 || nd < 0 || pt < 0 || pkv < 0 || dkv < 0 || !table_ok(cfg)) return FPM_EINVAL;
    lin_ctx lc;
    if (!lin_alloc(&lc, max64(cfg->nprefill, cfg->ndecode))) return FPM_ENOMEM;
    *seconds = 0.0;
    *extrapolated = 0;
    step_time(cfg, &lc, np, pt, pkv, nd, dkv, seconds, extrapolated, missing_phase);
    lin_free(&lc);
    return FPM_OK;
}
