/* Jumps of a replay without step records (spec 06 R-35): nothing observes
 * the steps of an idle period or of a decode-only stretch one by one, so the
 * engine jumps over them, with the same totals, request records and state as
 * stepping through them (the differential tests compare it with
 * src/fpmcore/replay/reference.py, which steps through every one). */
#include <stdint.h>

#include "fpm_internal.h"

static void jump_totals(engine_t *e, int64_t m, int64_t peak_blocks, int64_t peak_bytes, double last_t_end) {
    fpm_replay_totals *tt = &e->totals;
    if (e->nsteps_total == 0) tt->first_t_start = e->cfg.use_fixed_step ? (double)e->k * e->cfg.fixed_step_seconds : e->t;
    tt->last_t_end = last_t_end;
    tt->peak_running = max64(tt->peak_running, e->nrun);
    tt->peak_used_blocks = max64(tt->peak_used_blocks, peak_blocks);
    tt->peak_used_bytes = max64(tt->peak_used_bytes, peak_bytes);
    e->nsteps_total += m;
}

/* Steps k ... k + m - 1 repeat a step that scheduled nothing (no arrival in between). */
void jump_unchanged(engine_t *e, int64_t m, fpm_replay_output *out) {
    double last;
    if (e->cfg.use_fixed_step)
        last = (double)(e->k + m - 1) * e->cfg.fixed_step_seconds + e->cfg.fixed_step_seconds;
    else
        last = e->t;
    jump_totals(e, m, used_blocks(e), used_bytes(e), last);
    if (out) {
        count_add(&out->nsteps, m);
        count_add_product(&out->nheld, m, e->nrun * (1 + e->G));
    }
    e->k += m;
    if (e->cfg.use_fixed_step) e->t = last;
    e->capacity_bound = e->wq_len > 0 && e->capacity_bound;
}

/* Per group: the blocks r holds after the allocation of decode step j of a stretch from computed c. */
static int64_t stretch_held(const engine_t *e, const request_t *r, int gi, int64_t j) {
    const fpm_group *g = &e->cfg.groups[gi];
    const hold_t *h = hold_of(e, r, gi);
    int64_t c = r->computed + j;
    if (g->kind == FPM_KIND_FULL) return max64(h->hi, cdiv64(c + 1, g->block));
    if (is_windowed(g->kind)) {
        int64_t lo = max64(h->lo, window_first(g, c));
        return max64(h->hi, cdiv64(c + 1, g->block)) - lo;
    }
    return pool_held(e, r, gi);
}

/* Do the new blocks (or bytes) the running requests take over m decode steps
 * fit in room?  Each request's need is taken from what is left of the room,
 * so no sum passes it: no overflow for any m the stretch may ask about. */
static int stretch_fits(const engine_t *e, int64_t m, int bytes, int64_t room) {
    if (room < 0) return 0;
    int64_t left = room;
    for (int64_t q = 0; q < e->nrun; q++) {
        const request_t *r = &e->req[e->running[q]];
        for (int gi = 0; gi < e->G; gi++) {
            const fpm_group *g = &e->cfg.groups[gi];
            if (!is_attention(g->kind)) continue;
            const hold_t *h = hold_of(e, r, gi);
            int64_t n = max64(cdiv64(r->computed + m, g->block) - h->hi, 0), unit = bytes ? g->page : 1;
            if (n > left / unit) return 0;
            left -= n * unit;
        }
    }
    return 1;
}

/* The least common multiple of l and n, or cap when it passes cap (l, n >= 1). */
static int64_t lcm_capped(int64_t l, int64_t n, int64_t cap) {
    int64_t a = l, b = n;
    while (b) {
        int64_t t = a % b;
        a = b;
        b = t;
    }
    if (l / a > cap / n) return cap;
    return l / a * n;
}

/* The period of a stretch's pool use: the least common multiple of the
 * windowed groups' blocks and chunks (capped at cap).  A windowed group holds
 * as many blocks one period later as now or more; a full group's holding only
 * grows, and a state group's is fixed: so the peak lies in the stretch's last period. */
static int64_t lcm_blocks(const engine_t *e, int64_t cap) {
    int64_t l = 1;
    for (int gi = 0; gi < e->G && l < cap; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        if (!is_windowed(g->kind)) continue;
        l = lcm_capped(l, g->block, cap);
        if (g->kind == FPM_KIND_CHUNK && l < cap) l = lcm_capped(l, g->window, cap);
    }
    return l;
}

/* A decode-only stretch: every running request decodes one token per step,
 * nothing waits, nothing arrives or finishes, and the pool has room for all
 * of it.  Returns the steps jumped (0: take a normal step). */
int64_t jump_decodes(engine_t *e, fpm_replay_output *out) {
    if (e->pc || !e->cfg.use_fixed_step || e->wq_len > 0 || e->nrun == 0 || e->nrun > e->token_budget) return 0;
    const int64_t L = e->cfg.max_model_len;
    int64_t m = INT64_MAX;
    for (int64_t q = 0; q < e->nrun; q++) {
        const request_t *r = &e->req[e->running[q]];
        int64_t len = req_len(r);
        if (r->prefill_chunk || r->computed != len - 1 || r->generated < 1) return 0;
        m = min64(m, min64(r->output_len - r->generated, L - len) - 1);
    }
    if (e->pend < e->n && e->mode == FPM_ARRIVE_STEP) m = min64(m, e->in[e->order[e->pend]].arrival_step - e->k);
    m = min64(m, e->max_steps - e->nsteps_total);
    if (m < 2) return 0;
    int bytes = !e->block_mode;
    int64_t room = bytes ? e->cap - e->used_bytes : e->usable - e->used_blocks;
    if (!stretch_fits(e, m, bytes, room)) {
        int64_t lo = 0, hi = m; /* the largest feasible m */
        while (lo < hi) {
            int64_t mid = lo + (hi - lo + 1) / 2;
            if (stretch_fits(e, mid, bytes, room))
                lo = mid;
            else
                hi = mid - 1;
        }
        m = lo;
        if (m < 2) return 0;
    }
    /* the peak use of the stretch lies in its last period of blocks */
    int64_t period = lcm_blocks(e, m), peak_blocks = 0, peak_bytes = 0;
    for (int64_t j = max64(0, m - period); j < m; j++) {
        int64_t ub = 0, uy = 0;
        for (int64_t q = 0; q < e->nrun; q++) {
            const request_t *r = &e->req[e->running[q]];
            for (int gi = 0; gi < e->G; gi++) {
                int64_t h = stretch_held(e, r, gi, j);
                ub += h;
                uy += h * e->cfg.groups[gi].page;
            }
        }
        peak_blocks = max64(peak_blocks, ub);
        peak_bytes = max64(peak_bytes, uy);
    }
    /* the state after the stretch */
    e->used_blocks = e->used_bytes = 0;
    for (int64_t q = 0; q < e->nrun; q++) {
        request_t *r = &e->req[e->running[q]];
        for (int gi = 0; gi < e->G; gi++) {
            const fpm_group *g = &e->cfg.groups[gi];
            hold_t *h = hold_of(e, r, gi);
            int64_t c = r->computed + m - 1; /* the last allocation is c -> c + 1 */
            if (is_attention(g->kind)) {
                if (is_windowed(g->kind)) h->lo = max64(h->lo, window_first(g, c));
                h->hi = max64(h->hi, cdiv64(c + 1, g->block));
            }
        }
        r->computed += m;
        r->generated += m;
        pool_thresholds(e, r);
    }
    for (int64_t q = 0; q < e->nrun; q++) {
        const request_t *r = &e->req[e->running[q]];
        for (int gi = 0; gi < e->G; gi++) {
            int64_t h = pool_held(e, r, gi);
            e->used_blocks += h;
            e->used_bytes += h * e->cfg.groups[gi].page;
        }
    }
    double s = e->cfg.fixed_step_seconds, last = (double)(e->k + m - 1) * s + s;
    jump_totals(e, m, peak_blocks, peak_bytes, last);
    if (out) {
        count_add(&out->nsteps, m);
        count_add_product(&out->nsched, m, e->nrun);
        count_add_product(&out->nheld, m, e->nrun * (1 + e->G));
    }
    e->executed += m;
    e->capacity_bound = 0;
    e->k += m;
    e->t = last;
    return m;
}
