/* Replay engine (spec 06).  Mirrors src/fpmcore/replay/reference.py
 * function by function; the two must give identical records. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fpmcore.h"

/* ---------------------------------------------------------------- helpers */

static int64_t cdiv64(int64_t a, int64_t b) { return a >= 0 ? (a + b - 1) / b : -((-a) / b); }
static int64_t floordiv64(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* 04 G-3: ((x - 1) // u) * u, floored at 0. */
static int64_t pos64(int64_t x, int64_t u) { return max64(floordiv64(x - 1, u) * u, 0); }

/* vLLM 0.33.0 is_mamba_prefill_checkpoint_valid (04 G-4 conditions 3-7). */
static int ckpt_valid(int64_t start, int64_t end, int64_t ckpt, int64_t hash_block, int64_t block, int64_t align) {
    if (align <= 0) return 0;
    return start % hash_block == 0 && cdiv64(end, block) - 2 > floordiv64(start - 1, block) &&
           start + hash_block <= ckpt && start < ckpt && ckpt < end && (ckpt - start) % align == 0;
}

fpm_status fpm_align_stop(const fpm_align_query *q, int64_t *out) {
    if (q == NULL || out == NULL) return FPM_EINVAL;
    if (q->block_size <= 0 || q->hash_block_size <= 0 || q->num_new_tokens < 0 || q->start < 0 ||
        q->checkpoint_alignment < 0)
        return FPM_EINVAL;
    int64_t start = q->start, k = q->num_new_tokens, b = q->block_size;
    int64_t prefill_end = max64(q->prompt_len, q->num_tokens - 1);
    if (start >= prefill_end) {
        *out = k;
        return FPM_OK;
    }
    int64_t last_cache = pos64(q->num_tokens, b);
    int64_t end = start + k;
    int64_t ckpt_pos = pos64(prefill_end, b);
    int internal = q->checkpoint_alignment > 0 && end >= prefill_end &&
                   ckpt_valid(start, end, ckpt_pos, q->hash_block_size, b, q->checkpoint_alignment);
    if (internal) last_cache = 0;
    if (end < prefill_end) {
        int64_t aligned = floordiv64(end, b) * b;
        if (aligned > start || b <= q->max_num_batched_tokens) end = aligned;
    }
    int64_t stops[3];
    int ns = 0;
    stops[ns++] = (start % b != 0 && !internal) ? (floordiv64(start, b) + 1) * b : 0;
    stops[ns++] = last_cache;
    int64_t j = q->junction;
    if (start < j && j < end)
        stops[ns++] = (q->junction_checkpoint && j <= q->prompt_len) ? j : start + floordiv64(j - start, b) * b;
    int64_t best = -1;
    for (int i = 0; i < ns; i++)
        if (start < stops[i] && stops[i] < end && (best < 0 || stops[i] < best)) best = stops[i];
    if (best >= 0) end = best;
    *out = max64(end - start, 0);
    return FPM_OK;
}

/* ---------------------------------------------------------- latency model */

typedef struct {
    double *kx, *ky, *tx, *ty, *bx, *by; /* scratch knots, sized to the largest table */
    int extrapolated;
} lin_ctx;

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

/* R-31 with caller scratch. */
static void step_time_ctx(const fpm_replay_config *cfg, lin_ctx *lc, int64_t np, int64_t pt, int64_t pkv,
                          int64_t nd, int64_t dkv, double *sec, int32_t *extra, int32_t *missing) {
    double total = 0.0;
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
    }
    *sec = total;
    *extra = lc->extrapolated;
}

static int table_ok(const fpm_replay_config *cfg) {
    if (cfg->nprefill < 0 || cfg->ndecode < 0) return 0;
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

static int lin_alloc(lin_ctx *lc, int64_t n) {
    if (n < 1) n = 1;
    double *mem = calloc((size_t)n * 6, sizeof(double));
    if (mem == NULL) return 0;
    lc->kx = mem;
    lc->ky = mem + n;
    lc->tx = mem + 2 * n;
    lc->ty = mem + 3 * n;
    lc->bx = mem + 4 * n;
    lc->by = mem + 5 * n;
    return 1;
}

fpm_status fpm_step_time(const fpm_replay_config *cfg, int64_t np, int64_t pt, int64_t pkv, int64_t nd,
                         int64_t dkv, double *seconds, int32_t *extrapolated, int32_t *missing_phase) {
    if (cfg == NULL || seconds == NULL || extrapolated == NULL || missing_phase == NULL) return FPM_EINVAL;
    if (np < 0 || nd < 0 || pt < 0 || pkv < 0 || dkv < 0 || !table_ok(cfg)) return FPM_EINVAL;
    lin_ctx lc;
    if (!lin_alloc(&lc, max64(cfg->nprefill, cfg->ndecode))) return FPM_ENOMEM;
    *seconds = 0.0;
    *extrapolated = 0;
    step_time_ctx(cfg, &lc, np, pt, pkv, nd, dkv, seconds, extrapolated, missing_phase);
    free(lc.kx);
    return FPM_OK;
}

/* ------------------------------------------------------- sizing (01 §3.5) */

fpm_status fpm_block_range(const fpm_group *g, int64_t computed, int64_t target, int64_t *first, int64_t *end) {
    if (g == NULL || first == NULL || end == NULL || g->block < 1 || computed < 0 || target < computed) return FPM_EINVAL;
    if (g->kind == FPM_KIND_RING || g->kind == FPM_KIND_MAMBA) {
        *first = 0;
        *end = target > 0 ? g->blocks_per_request : 0;
        return FPM_OK;
    }
    if ((g->kind == FPM_KIND_WINDOW || g->kind == FPM_KIND_CONV) && g->window < 1) return FPM_EINVAL;
    *end = cdiv64(target, g->block);
    *first = (g->kind == FPM_KIND_FULL) ? 0 : max64(0, computed - (g->window - 1)) / g->block;
    return FPM_OK;
}

fpm_status fpm_peak_request_blocks(const fpm_group *g, int64_t context, int64_t max_num_tokens, int64_t *out) {
    if (g == NULL || out == NULL || g->block < 1 || context < 1 || max_num_tokens < 1) return FPM_EINVAL;
    if (g->kind == FPM_KIND_RING || g->kind == FPM_KIND_MAMBA) {
        *out = g->blocks_per_request;
    } else if (g->kind == FPM_KIND_FULL) {
        *out = cdiv64(context, g->block);
    } else {
        if (g->window < 1) return FPM_EINVAL;
        *out = min64(cdiv64(context, g->block), cdiv64(g->window - 1 + max_num_tokens + g->block - 1, g->block));
    }
    return FPM_OK;
}

/* ------------------------------------------------------------------- pool */

typedef struct {
    int64_t P, O, g, c, preemptions, hit;
    int32_t status, admitted_once, queued; /* queued: 0 none, 1 waiting, 2 running */
    int64_t *lo, *hi, *state, *cols, *trans, *ckpt; /* ngroups each */
    int64_t slot, junction, own_key, ooff, olen;   /* prefix caching */
} req_t;

struct pc_pool_s;

typedef struct {
    const fpm_replay_config *cfg;
    int G;
    int block_mode, align_mode, split, ckpt_all;
    int64_t usable, cap, first_align, sched_block, hash_block, fixed_bytes;
    int64_t used_blocks, used_bytes;
    req_t *reqs;
    int64_t nreqs;
    int pc;
    struct pc_pool_s *pool;
} eng_t;

static int64_t lenof(const req_t *r) { return r->P + r->g; }
static int64_t pc_held_fwd(const eng_t *e, const req_t *r, int gi);
static void pc_release_fwd(eng_t *e, req_t *r);

static int64_t mamba_ckpt(const eng_t *e, const req_t *r, const fpm_group *g, int64_t c, int64_t a) {
    if (g->checkpoint_blocks < 1 || g->checkpoint_alignment <= 0) return 0;
    int64_t prefill_end = max64(r->P, lenof(r) - 1);
    if (a < prefill_end || cdiv64(a, g->block) - 2 < 0) return 0;
    int64_t q = pos64(a, e->hash_block);
    return ckpt_valid(c, a, q, e->hash_block, g->block, g->checkpoint_alignment);
}

static int is_attn(int32_t kind) { return kind == FPM_KIND_FULL || kind == FPM_KIND_WINDOW || kind == FPM_KIND_CONV; }
static int is_windowed(int32_t kind) { return kind == FPM_KIND_WINDOW || kind == FPM_KIND_CONV; }

static int64_t first_block(const fpm_group *g, int64_t c) { return max64(0, c - (g->window - 1)) / g->block; }

/* R-4 ... R-6 projection after R-7 step 1: new blocks, new bytes and total held bytes of c -> a. */
static void project(const eng_t *e, const req_t *r, int64_t c, int64_t a, int64_t *new_blocks, int64_t *new_bytes,
                    int64_t *held_bytes) {
    int64_t nb = 0, nby = 0, hb = 0;
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg->groups[gi];
        int64_t n, h;
        if (g->kind == FPM_KIND_FULL) {
            int64_t hi = cdiv64(a, g->block);
            n = max64(hi - r->hi[gi], 0);
            h = max64(hi, r->hi[gi]);
        } else if (is_windowed(g->kind)) {
            int64_t first = first_block(g, c), hi = cdiv64(a, g->block);
            int64_t lo = r->hi[gi] > 0 ? max64(first, r->lo[gi]) : first;
            n = max64(hi - max64(r->hi[gi], lo), 0);
            h = max64(hi, r->hi[gi]) - lo;
        } else if (g->kind == FPM_KIND_MAMBA && e->align_mode) {
            int64_t d = cdiv64(a, g->block) - r->cols[gi];
            int64_t ck = mamba_ckpt(e, r, g, c, a);
            n = d > 0 ? min64(d, 1 + ck) : 0;
            int64_t tr = (d > 0 && r->state[gi] > 0) ? 1 : 0;
            h = 1 + tr + ck;
        } else {
            n = r->state[gi] == 0 ? g->blocks_per_request : 0;
            h = g->blocks_per_request;
        }
        nb += n;
        nby += n * g->page;
        hb += h * g->page;
    }
    *new_blocks = nb;
    *new_bytes = nby;
    *held_bytes = hb;
}

static int64_t held_count(const eng_t *e, const req_t *r, int gi) {
    const fpm_group *g = &e->cfg->groups[gi];
    if (e->pc) return pc_held_fwd(e, r, gi);
    if (is_attn(g->kind)) return r->hi[gi] - r->lo[gi];
    if (g->kind == FPM_KIND_MAMBA && e->align_mode) return r->state[gi] + r->trans[gi] + r->ckpt[gi];
    return r->state[gi];
}

static void free_blocks(eng_t *e, const fpm_group *g, int64_t n) {
    e->used_blocks -= n;
    e->used_bytes -= n * g->page;
}

static void take_blocks(eng_t *e, const fpm_group *g, int64_t n) {
    e->used_blocks += n;
    e->used_bytes += n * g->page;
}

/* R-7 step 1 */
static void release_skipped(eng_t *e, req_t *r) {
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg->groups[gi];
        if (is_windowed(g->kind)) {
            if (r->hi[gi] > 0) {
                int64_t first = first_block(g, r->c);
                if (first > r->lo[gi]) {
                    int64_t drop = min64(first, r->hi[gi]) - r->lo[gi];
                    if (drop > 0) {
                        free_blocks(e, g, drop);
                        r->lo[gi] += drop;
                    }
                }
            }
        } else if (g->kind == FPM_KIND_MAMBA && e->align_mode) {
            int64_t n = r->trans[gi] + r->ckpt[gi];
            if (n) {
                free_blocks(e, g, n);
                r->trans[gi] = 0;
                r->ckpt[gi] = 0;
            }
        }
    }
}

/* */
static void release_all(eng_t *e, req_t *r) {
    if (e->pc) {
        pc_release_fwd(e, r);
        return;
    }
    for (int gi = 0; gi < e->G; gi++) {
        int64_t n = held_count(e, r, gi);
        if (n) free_blocks(e, &e->cfg->groups[gi], n);
        r->lo[gi] = r->hi[gi] = r->state[gi] = r->cols[gi] = r->trans[gi] = r->ckpt[gi] = 0;
    }
}

static void commit(eng_t *e, req_t *r, int64_t c, int64_t a) {
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg->groups[gi];
        if (g->kind == FPM_KIND_FULL) {
            int64_t hi = cdiv64(a, g->block);
            if (hi > r->hi[gi]) {
                take_blocks(e, g, hi - r->hi[gi]);
                r->hi[gi] = hi;
            }
        } else if (is_windowed(g->kind)) {
            int64_t first = first_block(g, c), hi = cdiv64(a, g->block);
            if (r->hi[gi] == 0) r->lo[gi] = r->hi[gi] = first;
            if (hi > r->hi[gi]) {
                take_blocks(e, g, hi - r->hi[gi]);
                r->hi[gi] = hi;
            }
        } else if (g->kind == FPM_KIND_MAMBA && e->align_mode) {
            int64_t d = cdiv64(a, g->block) - r->cols[gi];
            int64_t ck = mamba_ckpt(e, r, g, c, a);
            if (d > 0) {
                if (r->state[gi] > 0) {
                    r->trans[gi] = 1;
                } else {
                    r->state[gi] = 1;
                    take_blocks(e, g, 1);
                }
                if (r->trans[gi]) take_blocks(e, g, 1);
                r->cols[gi] = cdiv64(a, g->block);
            }
            if (ck) {
                r->ckpt[gi] = 1;
                take_blocks(e, g, 1);
            }
        } else if (r->state[gi] == 0) {
            r->state[gi] = g->blocks_per_request;
            take_blocks(e, g, g->blocks_per_request);
        }
    }
}

/* bytes of c -> a from an empty holding. */
static int64_t fresh_bytes(const eng_t *e, int64_t c, int64_t a) {
    int64_t total = 0;
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg->groups[gi];
        int64_t n;
        if (g->kind == FPM_KIND_FULL)
            n = cdiv64(a, g->block);
        else if (is_windowed(g->kind))
            n = cdiv64(a, g->block) - first_block(g, c);
        else if (g->kind == FPM_KIND_MAMBA && e->align_mode)
            n = 1;
        else
            n = g->blocks_per_request;
        total += n * g->page;
    }
    return total;
}

/* blocks and bytes of the whole input sequence from h. */
static void input_need(const eng_t *e, const req_t *r, int64_t h, int64_t *blocks, int64_t *bytes) {
    const fpm_replay_config *cfg = e->cfg;
    int64_t nt = min64(lenof(r), cfg->max_model_len), b = 0, by = 0;
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &cfg->groups[gi];
        int64_t n;
        if (g->kind == FPM_KIND_FULL)
            n = cdiv64(nt, g->block) - h / g->block;
        else if (is_windowed(g->kind))
            n = min64(cdiv64(nt, g->block),
                      cdiv64(min64(g->window - 1 + cfg->max_num_batched_tokens, cfg->max_model_len), g->block) + 1);
        else if (g->kind == FPM_KIND_MAMBA && e->align_mode)
            n = min64(cdiv64(nt, g->block) - h / g->block, 1 + mamba_ckpt(e, r, g, h, nt));
        else
            n = g->blocks_per_request;
        n = max64(n, 0);
        b += n;
        by += n * g->page;
    }
    *blocks = b;
    *bytes = by;
}

/* ------------------------------------------- prefix-caching pool (R-36 ... R-38)
 * vLLM 0.33.0's BlockPool: a free queue of block ids, reference counts, the
 * content key each cached block carries and a key -> blocks map whose lookup
 * returns the block cached first.  Mirrors src/fpmcore/replay/prefix.py and
 * the _pc_* methods of the Python reference. */

#define PC_MAXM 4 /* Mamba blocks one request holds in one group: running, transient, checkpoint */

typedef struct {
    int64_t ka, kb; /* ka == INT64_MIN: empty */
    int32_t head, tail;
    int64_t stamp; /* step (+1) in which a Mamba state was cached under this key */
} ht_entry;

typedef struct pc_pool_s {
    int64_t U, maxc, nslots, G;
    int32_t *qn, *qp, *ref, *bnext;
    int64_t qlen;
    int64_t *bka, *bkb;
    ht_entry *ht;
    uint64_t hmask;
    int64_t stamp;
    /* slot tables (one slot per request holding blocks) */
    int32_t *att;
    int64_t *att_len;
    int64_t *mcol;
    int32_t *mid;
    int64_t *mn, *mcols, *ncached;
    int32_t *ring;
    int64_t *free_slots;
    int64_t nfree;
    /* scratch */
    int32_t *hit_att, *hit_m, *batch;
    int64_t *hit_att_n;
    int32_t *newb;
} pc_pool;

static uint64_t pc_hash(int64_t a, int64_t b) {
    uint64_t x = (uint64_t)a * 0x9E3779B97F4A7C15ULL ^ ((uint64_t)b + 0x632BE59BD9B4E019ULL) * 0xC2B2AE3D27D4EB4FULL;
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ULL;
    x ^= x >> 29;
    return x;
}

static int64_t ht_find(const pc_pool *p, int64_t a, int64_t b) {
    uint64_t i = pc_hash(a, b) & p->hmask;
    while (p->ht[i].ka != INT64_MIN) {
        if (p->ht[i].ka == a && p->ht[i].kb == b) return (int64_t)i;
        i = (i + 1) & p->hmask;
    }
    return -1;
}

static void ht_delete_at(pc_pool *p, uint64_t i) {
    p->ht[i].ka = INT64_MIN;
    uint64_t j = i;
    for (;;) {
        j = (j + 1) & p->hmask;
        if (p->ht[j].ka == INT64_MIN) break;
        uint64_t k = pc_hash(p->ht[j].ka, p->ht[j].kb) & p->hmask;
        int move = (j > i) ? (k <= i || k > j) : (k <= i && k > j);
        if (move) {
            p->ht[i] = p->ht[j];
            p->ht[j].ka = INT64_MIN;
            i = j;
        }
    }
}

/* drop block b's key (eviction) */
static void pc_evict(pc_pool *p, int32_t b) {
    if (p->bka[b] == INT64_MIN) return;
    int64_t i = ht_find(p, p->bka[b], p->bkb[b]);
    if (i >= 0) {
        ht_entry *en = &p->ht[i];
        int32_t prev = 0, cur = en->head;
        while (cur && cur != b) {
            prev = cur;
            cur = p->bnext[cur];
        }
        if (cur == b) {
            if (prev)
                p->bnext[prev] = p->bnext[b];
            else
                en->head = p->bnext[b];
            if (en->tail == b) en->tail = prev;
            p->bnext[b] = 0;
            if (en->head == 0) ht_delete_at(p, (uint64_t)i);
        }
    }
    p->bka[b] = INT64_MIN;
}

static void pc_set_key(pc_pool *p, int32_t b, int64_t a, int64_t kb, int mamba) {
    pc_evict(p, b);
    p->bka[b] = a;
    p->bkb[b] = kb;
    int64_t i = ht_find(p, a, kb);
    if (i < 0) {
        uint64_t j = pc_hash(a, kb) & p->hmask;
        while (p->ht[j].ka != INT64_MIN) j = (j + 1) & p->hmask;
        p->ht[j].ka = a;
        p->ht[j].kb = kb;
        p->ht[j].head = p->ht[j].tail = b;
        p->ht[j].stamp = 0;
        i = (int64_t)j;
    } else {
        p->bnext[p->ht[i].tail] = b;
        p->ht[i].tail = b;
    }
    p->bnext[b] = 0;
    if (mamba) p->ht[i].stamp = p->stamp;
}

static int32_t pc_lookup_key(const pc_pool *p, int64_t a, int64_t b) {
    int64_t i = ht_find(p, a, b);
    return i < 0 ? 0 : p->ht[i].head;
}

static void q_unlink(pc_pool *p, int32_t b) {
    int32_t pr = p->qp[b], nx = p->qn[b];
    p->qn[pr] = nx;
    p->qp[nx] = pr;
    p->qlen--;
}

static void q_insert_after(pc_pool *p, int32_t pr, int32_t b) {
    int32_t nx = p->qn[pr];
    p->qn[pr] = b;
    p->qp[b] = pr;
    p->qn[b] = nx;
    p->qp[nx] = b;
    p->qlen++;
}

static void pc_get_new(pc_pool *p, int64_t n, int32_t *out) {
    for (int64_t i = 0; i < n; i++) {
        int32_t b = p->qn[0];
        q_unlink(p, b);
        pc_evict(p, b);
        p->ref[b] = 1;
        out[i] = b;
    }
}

/* free_blocks: cached blocks to the back in batch order, the others to the front */
static void pc_free_batch(pc_pool *p, const int32_t *bs, int64_t n) {
    int32_t front = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t b = bs[i];
        p->ref[b]--;
        if (p->ref[b] == 0 && p->bka[b] == INT64_MIN) {
            q_insert_after(p, front, b);
            front = b;
        }
    }
    for (int64_t i = 0; i < n; i++) {
        int32_t b = bs[i];
        if (p->ref[b] == 0 && p->bka[b] != INT64_MIN) q_insert_after(p, p->qp[0], b);
    }
}

static void pc_touch(pc_pool *p, int32_t b) {
    if (p->ref[b] == 0) q_unlink(p, b);
    p->ref[b]++;
}

/* ---- engine side of the prefix-caching pool ---- */

static int64_t pc_origin(const eng_t *e, const req_t *r, int64_t q) {
    const fpm_replay_config *cfg = e->cfg;
    for (int64_t i = 0; i < r->olen; i++)
        if (q <= cfg->origin_upto[r->ooff + i]) return cfg->origin_key[r->ooff + i];
    return r->own_key;
}

static void pc_key(const eng_t *e, const req_t *r, int gi, int64_t j, int64_t *ka, int64_t *kb) {
    *ka = pc_origin(e, r, (j + 1) * e->sched_block);
    *kb = j * e->G + gi;
}

#define PSLOT(p, slot, gi) ((slot) * (p)->G + (gi))

/* vLLM _needs_internal_checkpoint with the block-table condition. */
static int64_t pc_ckpt(const eng_t *e, const req_t *r, int gi, int64_t c, int64_t a, const int64_t *cols, int64_t ncols,
                       int64_t mcols) {
    const fpm_group *g = &e->cfg->groups[gi];
    if (!mamba_ckpt(e, r, g, c, a)) return 0;
    int64_t idx = cdiv64(a, g->block) - 2;
    if (idx >= mcols) return 1;
    for (int64_t i = 0; i < ncols; i++)
        if (cols[i] == idx) return 0;
    return 1;
}

static int64_t pc_bound(const eng_t *e, int64_t c, int gi, int64_t mcols) {
    if (c - 1 <= 0) return 0;
    return min64((c - 1) / e->cfg->groups[gi].block, mcols);
}

/* blocks to take from the free queue and blocks held after, for c -> a; hits != 0: a waiting head */
static void pc_need(const eng_t *e, const req_t *r, int64_t c, int64_t a, int hits, int64_t *need_out,
                    int64_t *held_out) {
    const pc_pool *p = e->pool;
    int64_t need = 0, held = 0;
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg->groups[gi];
        int64_t s = r->slot >= 0 ? PSLOT(p, r->slot, gi) : -1;
        if (g->kind == FPM_KIND_FULL) {
            int64_t t;
            if (hits) {
                t = p->hit_att_n[gi];
                for (int64_t j = 0; j < t; j++)
                    if (p->ref[p->hit_att[gi * p->maxc + j]] == 0) need++;
            } else {
                t = s >= 0 ? p->att_len[s] : 0;
            }
            need += max64(cdiv64(a, g->block) - t, 0);
            held += max64(cdiv64(a, g->block), t);
        } else if (g->kind == FPM_KIND_MAMBA) {
            int64_t cols[PC_MAXM], ncols = 0, mcols = 0;
            if (hits) {
                if (p->hit_m[gi]) {
                    cols[ncols++] = c / g->block - 1;
                    mcols = c / g->block;
                    if (p->ref[p->hit_m[gi]] == 0) need++;
                }
            } else if (s >= 0) {
                int64_t bound = pc_bound(e, c, gi, p->mcols[s]);
                for (int64_t i = 0; i < p->mn[s]; i++)
                    if (p->mcol[s * PC_MAXM + i] >= bound) cols[ncols++] = p->mcol[s * PC_MAXM + i];
                mcols = p->mcols[s];
            }
            int64_t d = cdiv64(a, g->block) - mcols;
            int64_t ck = pc_ckpt(e, r, gi, c, a, cols, ncols, mcols);
            int64_t nn = d > 0 ? min64(d, 1 + ck) : 0;
            need += nn;
            held += ncols + nn;
        } else {
            if (s < 0 || p->ring[s] == 0) need++;
            held++;
        }
    }
    *need_out = need;
    *held_out = held;
}

static void pc_release_skipped(eng_t *e, req_t *r) {
    pc_pool *p = e->pool;
    if (r->slot < 0) return;
    for (int gi = 0; gi < e->G; gi++) {
        if (e->cfg->groups[gi].kind != FPM_KIND_MAMBA) continue;
        int64_t s = PSLOT(p, r->slot, gi);
        int64_t bound = pc_bound(e, r->c, gi, p->mcols[s]);
        int64_t nb = 0, keep = 0;
        for (int64_t i = p->mn[s] - 1; i >= 0; i--)
            if (p->mcol[s * PC_MAXM + i] < bound) p->batch[nb++] = p->mid[s * PC_MAXM + i];
        if (nb == 0) continue;
        for (int64_t i = 0; i < p->mn[s]; i++) {
            if (p->mcol[s * PC_MAXM + i] >= bound) {
                p->mcol[s * PC_MAXM + keep] = p->mcol[s * PC_MAXM + i];
                p->mid[s * PC_MAXM + keep] = p->mid[s * PC_MAXM + i];
                keep++;
            }
        }
        p->mn[s] = keep;
        pc_free_batch(p, p->batch, nb);
    }
}

static void pc_cache_blocks(eng_t *e, req_t *r, int64_t num_tokens) {
    pc_pool *p = e->pool;
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg->groups[gi];
        if (g->kind != FPM_KIND_FULL && g->kind != FPM_KIND_MAMBA) continue;
        int64_t s = PSLOT(p, r->slot, gi);
        int64_t nfull = num_tokens / g->block, start = p->ncached[s];
        if (start >= nfull) continue;
        if (g->kind == FPM_KIND_FULL) {
            for (int64_t j = start; j < nfull; j++) {
                int64_t ka, kb;
                pc_key(e, r, gi, j, &ka, &kb);
                pc_set_key(p, p->att[s * p->maxc + j], ka, kb, 0);
            }
        } else {
            int64_t bcols[2];
            int nbc = 0;
            int64_t qs[2] = {r->P - 1, r->junction};
            for (int i = 0; i < 2; i++) {
                if (qs[i] > 0) {
                    int64_t col = (qs[i] / e->sched_block * e->sched_block) / g->block - 1;
                    if (col >= 0) bcols[nbc++] = col;
                }
            }
            for (int64_t i = 0; i < p->mn[s]; i++) {
                int64_t col = p->mcol[s * PC_MAXM + i];
                int hit = 0;
                for (int k2 = 0; k2 < nbc; k2++)
                    if (bcols[k2] == col) hit = 1;
                if (start <= col && col < nfull && hit) {
                    int64_t ka, kb;
                    pc_key(e, r, gi, col, &ka, &kb);
                    pc_set_key(p, p->mid[s * PC_MAXM + i], ka, kb, 1);
                }
            }
        }
        p->ncached[s] = nfull;
    }
}

static void pc_commit(eng_t *e, req_t *r, int64_t c, int64_t a, int hits) {
    pc_pool *p = e->pool;
    if (r->slot < 0) {
        r->slot = p->free_slots[--p->nfree];
        for (int gi = 0; gi < e->G; gi++) {
            int64_t s = PSLOT(p, r->slot, gi);
            p->att_len[s] = p->mn[s] = p->mcols[s] = p->ncached[s] = 0;
            p->ring[s] = 0;
        }
    }
    if (hits) { /* vLLM allocate_new_computed_blocks: every group's hits are touched first */
        for (int gi = 0; gi < e->G; gi++) {
            const fpm_group *g = &e->cfg->groups[gi];
            int64_t s = PSLOT(p, r->slot, gi);
            if (g->kind == FPM_KIND_FULL) {
                for (int64_t j = 0; j < p->hit_att_n[gi]; j++) {
                    int32_t b = p->hit_att[gi * p->maxc + j];
                    pc_touch(p, b);
                    p->att[s * p->maxc + j] = b;
                }
                p->att_len[s] = p->hit_att_n[gi];
                p->ncached[s] = p->hit_att_n[gi];
            } else if (g->kind == FPM_KIND_MAMBA && p->hit_m[gi]) {
                pc_touch(p, p->hit_m[gi]);
                p->mcol[s * PC_MAXM] = c / g->block - 1;
                p->mid[s * PC_MAXM] = p->hit_m[gi];
                p->mn[s] = 1;
                p->mcols[s] = p->ncached[s] = c / g->block;
            }
        }
    }
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg->groups[gi];
        int64_t s = PSLOT(p, r->slot, gi);
        if (g->kind == FPM_KIND_FULL) {
            int64_t nn = cdiv64(a, g->block) - p->att_len[s];
            if (nn > 0) {
                pc_get_new(p, nn, &p->att[s * p->maxc + p->att_len[s]]);
                p->att_len[s] += nn;
            }
        } else if (g->kind == FPM_KIND_MAMBA) {
            int64_t req = cdiv64(a, g->block), d = req - p->mcols[s];
            int64_t ck = pc_ckpt(e, r, gi, c, a, &p->mcol[s * PC_MAXM], p->mn[s], p->mcols[s]);
            if (d > 0) {
                pc_get_new(p, 1 + ck, p->newb);
                if (ck) {
                    p->mcol[s * PC_MAXM + p->mn[s]] = req - 2;
                    p->mid[s * PC_MAXM + p->mn[s]] = p->newb[0];
                    p->mn[s]++;
                }
                p->mcol[s * PC_MAXM + p->mn[s]] = req - 1;
                p->mid[s * PC_MAXM + p->mn[s]] = p->newb[ck];
                p->mn[s]++;
                p->mcols[s] = req;
            }
        } else if (p->ring[s] == 0) {
            pc_get_new(p, 1, &p->ring[s]);
        }
    }
    pc_cache_blocks(e, r, min64(a, lenof(r)));
}

static void pc_release_fwd(eng_t *e, req_t *r) {
    pc_pool *p = e->pool;
    if (r->slot < 0) return;
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg->groups[gi];
        int64_t s = PSLOT(p, r->slot, gi), nb = 0;
        if (g->kind == FPM_KIND_FULL) {
            for (int64_t j = p->att_len[s] - 1; j >= 0; j--) p->batch[nb++] = p->att[s * p->maxc + j];
        } else if (g->kind == FPM_KIND_MAMBA) {
            for (int64_t i = p->mn[s] - 1; i >= 0; i--) p->batch[nb++] = p->mid[s * PC_MAXM + i];
        } else if (p->ring[s]) {
            p->batch[nb++] = p->ring[s];
        }
        if (nb) pc_free_batch(p, p->batch, nb);
    }
    p->free_slots[p->nfree++] = r->slot;
    r->slot = -1;
    r->junction = 0;
}

static int64_t pc_held_fwd(const eng_t *e, const req_t *r, int gi) {
    const pc_pool *p = e->pool;
    if (r->slot < 0) return 0;
    int64_t s = PSLOT(p, r->slot, gi);
    int32_t kind = e->cfg->groups[gi].kind;
    if (kind == FPM_KIND_FULL) return p->att_len[s];
    if (kind == FPM_KIND_MAMBA) return p->mn[s];
    return p->ring[s] ? 1 : 0;
}

/* the hit of a waiting head into the hit scratch; returns h, sets junction and same-step flag */
static int64_t pc_lookup(eng_t *e, req_t *r, int64_t *junction, int *same_step) {
    pc_pool *p = e->pool;
    int64_t B = e->sched_block, maxb = (lenof(r) - 1) / B, h_att, h;
    int has_att = 0, has_mamba = 0;
    for (int gi = 0; gi < e->G; gi++) {
        p->hit_att_n[gi] = 0;
        p->hit_m[gi] = 0;
        if (e->cfg->groups[gi].kind == FPM_KIND_FULL) has_att = 1;
        if (e->cfg->groups[gi].kind == FPM_KIND_MAMBA) has_mamba = 1;
    }
    if (has_att) {
        int64_t j = 0;
        for (; j < maxb; j++) {
            int all = 1;
            for (int gi = 0; gi < e->G && all; gi++) {
                if (e->cfg->groups[gi].kind != FPM_KIND_FULL) continue;
                int64_t ka, kb;
                pc_key(e, r, gi, j, &ka, &kb);
                int32_t b = pc_lookup_key(p, ka, kb);
                if (!b) all = 0;
                p->hit_att[gi * p->maxc + j] = b;
            }
            if (!all) break;
            for (int gi = 0; gi < e->G; gi++)
                if (e->cfg->groups[gi].kind == FPM_KIND_FULL) p->hit_att_n[gi] = j + 1;
        }
        h_att = j * B;
    } else {
        h_att = maxb * B;
    }
    h = h_att;
    if (has_mamba) {
        h = 0;
        for (int64_t i = h_att / B - 1; i >= 0 && h == 0; i--) {
            int all = 1;
            for (int gi = 0; gi < e->G && all; gi++) {
                if (e->cfg->groups[gi].kind != FPM_KIND_MAMBA) continue;
                int64_t ka, kb;
                pc_key(e, r, gi, i, &ka, &kb);
                if (!pc_lookup_key(p, ka, kb)) all = 0;
            }
            if (all) {
                h = (i + 1) * B;
                for (int gi = 0; gi < e->G; gi++) {
                    if (e->cfg->groups[gi].kind != FPM_KIND_MAMBA) continue;
                    int64_t ka, kb;
                    pc_key(e, r, gi, i, &ka, &kb);
                    p->hit_m[gi] = pc_lookup_key(p, ka, kb);
                }
            }
        }
    }
    for (int gi = 0; gi < e->G; gi++)
        if (e->cfg->groups[gi].kind == FPM_KIND_FULL) p->hit_att_n[gi] = min64(p->hit_att_n[gi], h / B);
    *junction = (has_att && has_mamba && h < h_att) ? h_att : 0;
    *same_step = 0;
    if (h > 0) {
        for (int gi = 0; gi < e->G; gi++) {
            if (e->cfg->groups[gi].kind != FPM_KIND_MAMBA) continue;
            int64_t ka, kb;
            pc_key(e, r, gi, h / B - 1, &ka, &kb);
            int64_t i = ht_find(p, ka, kb);
            if (i >= 0 && p->ht[i].stamp == p->stamp) *same_step = 1;
        }
    }
    return h;
}

/* R-20 in blocks with prefix caching */
static int64_t pc_input_need(const eng_t *e, const req_t *r, int64_t h) {
    const pc_pool *p = e->pool;
    int64_t nt = min64(lenof(r), e->cfg->max_model_len), total = 0;
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg->groups[gi];
        if (g->kind == FPM_KIND_FULL) {
            int64_t ev = 0;
            for (int64_t j = 0; j < p->hit_att_n[gi]; j++)
                if (p->ref[p->hit_att[gi * p->maxc + j]] == 0) ev++;
            total += max64(cdiv64(nt, g->block) - h / g->block, 0) + ev;
        } else if (g->kind == FPM_KIND_MAMBA) {
            int64_t cols[1], ncols = 0, ev = 0;
            if (p->hit_m[gi]) {
                cols[ncols++] = h / g->block - 1;
                if (p->ref[p->hit_m[gi]] == 0) ev = 1;
            }
            int64_t ck = pc_ckpt(e, r, gi, h, nt, cols, ncols, p->hit_m[gi] ? h / g->block : 0);
            total += max64(min64(cdiv64(nt, g->block) - h / g->block, 1 + ck), 0) + ev;
        } else {
            total += 1;
        }
    }
    return total;
}

/* */
static int try_allocate(eng_t *e, req_t *r, int64_t c, int64_t a, int64_t watermark, int hits) {
    if (e->pc) {
        int64_t need, held;
        pc_release_skipped(e, r);
        pc_need(e, r, c, a, hits, &need, &held);
        if (need > e->pool->qlen - watermark) return 0;
        pc_commit(e, r, c, a, hits);
        return 1;
    }
    release_skipped(e, r);
    int64_t nb, nby, hb;
    project(e, r, c, a, &nb, &nby, &hb);
    if (e->block_mode) {
        if (nb > e->usable - e->used_blocks - watermark) return 0;
    } else if (nby > e->cap - e->used_bytes) {
        return 0;
    }
    commit(e, r, c, a);
    return 1;
}

static int64_t split(const eng_t *e, const req_t *r, int64_t start, int64_t n) {
    if (!e->split) return n;
    fpm_align_query q;
    memset(&q, 0, sizeof q);
    q.start = start;
    q.num_new_tokens = n;
    q.prompt_len = r->P;
    q.num_tokens = lenof(r);
    q.block_size = e->sched_block;
    q.hash_block_size = e->hash_block;
    q.max_num_batched_tokens = e->cfg->max_num_batched_tokens;
    q.checkpoint_alignment = (e->ckpt_all && e->first_align > 0) ? e->first_align : 0;
    q.junction = r->junction;
    int64_t out = n;
    (void)fpm_align_stop(&q, &out);
    return out;
}

static int64_t used_blocks_of(const eng_t *e) { return e->pc ? e->usable - e->pool->qlen : e->used_blocks; }
static int64_t used_bytes_of(const eng_t *e) {
    return e->pc ? (e->usable - e->pool->qlen) * e->cfg->groups[0].page : e->used_bytes;
}

static void pc_free_pool(pc_pool *p) {
    if (p == NULL) return;
    free(p->qn);
    free(p->qp);
    free(p->ref);
    free(p->bnext);
    free(p->bka);
    free(p->bkb);
    free(p->ht);
    free(p->att);
    free(p->att_len);
    free(p->mcol);
    free(p->mid);
    free(p->mn);
    free(p->mcols);
    free(p->ncached);
    free(p->ring);
    free(p->free_slots);
    free(p->hit_att);
    free(p->hit_m);
    free(p->batch);
    free(p->hit_att_n);
    free(p->newb);
    free(p);
}

/* The pool of R-38: blocks 1 ... U in the free queue; slot tables for the requests that hold blocks. */
static pc_pool *pc_new_pool(int64_t U, int64_t G, int64_t maxc, int64_t nslots) {
    pc_pool *p = calloc(1, sizeof(pc_pool));
    if (p == NULL) return NULL;
    p->U = U;
    p->G = G;
    p->maxc = maxc;
    p->nslots = nslots;
    size_t nb = (size_t)U + 1, ns = (size_t)(nslots * G);
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)U + 16) cap <<= 1;
    p->hmask = cap - 1;
    p->qn = calloc(nb, sizeof(int32_t));
    p->qp = calloc(nb, sizeof(int32_t));
    p->ref = calloc(nb, sizeof(int32_t));
    p->bnext = calloc(nb, sizeof(int32_t));
    p->bka = calloc(nb, sizeof(int64_t));
    p->bkb = calloc(nb, sizeof(int64_t));
    p->ht = calloc((size_t)cap, sizeof(ht_entry));
    p->att = calloc(ns * (size_t)maxc + 1, sizeof(int32_t));
    p->att_len = calloc(ns + 1, sizeof(int64_t));
    p->mcol = calloc(ns * PC_MAXM + 1, sizeof(int64_t));
    p->mid = calloc(ns * PC_MAXM + 1, sizeof(int32_t));
    p->mn = calloc(ns + 1, sizeof(int64_t));
    p->mcols = calloc(ns + 1, sizeof(int64_t));
    p->ncached = calloc(ns + 1, sizeof(int64_t));
    p->ring = calloc(ns + 1, sizeof(int32_t));
    p->free_slots = calloc((size_t)nslots + 1, sizeof(int64_t));
    p->hit_att = calloc((size_t)(G * maxc) + 1, sizeof(int32_t));
    p->hit_m = calloc((size_t)G + 1, sizeof(int32_t));
    p->batch = calloc((size_t)maxc + PC_MAXM + 2, sizeof(int32_t));
    p->hit_att_n = calloc((size_t)G + 1, sizeof(int64_t));
    p->newb = calloc(PC_MAXM, sizeof(int32_t));
    if (!p->qn || !p->qp || !p->ref || !p->bnext || !p->bka || !p->bkb || !p->ht || !p->att || !p->att_len ||
        !p->mcol || !p->mid || !p->mn || !p->mcols || !p->ncached || !p->ring || !p->free_slots || !p->hit_att ||
        !p->hit_m || !p->batch || !p->hit_att_n || !p->newb) {
        pc_free_pool(p);
        return NULL;
    }
    for (uint64_t i = 0; i < cap; i++) p->ht[i].ka = INT64_MIN;
    for (int64_t b = 0; b <= U; b++) {
        p->qn[b] = (int32_t)(b == U ? 0 : b + 1);
        p->qp[b] = (int32_t)(b == 0 ? U : b - 1);
        p->bka[b] = INT64_MIN;
    }
    p->qlen = U;
    for (int64_t i = 0; i < nslots; i++) p->free_slots[i] = nslots - 1 - i;
    p->nfree = nslots;
    return p;
}

/* --------------------------------------------------------------- the loop */

typedef struct {
    const fpm_replay_request *in;
    int64_t idx;
    int32_t by_time;
} order_item;

static int order_cmp(const void *pa, const void *pb) {
    const order_item *a = pa, *b = pb;
    if (a->by_time) {
        double x = a->in[a->idx].arrival_time, y = b->in[b->idx].arrival_time;
        if (x < y) return -1;
        if (x > y) return 1;
    } else {
        int64_t x = a->in[a->idx].arrival_step, y = b->in[b->idx].arrival_step;
        if (x < y) return -1;
        if (x > y) return 1;
    }
    return a->idx < b->idx ? -1 : (a->idx > b->idx ? 1 : 0);
}

static int config_ok(const fpm_replay_config *cfg) {
    if (cfg->ngroups < 1 || cfg->groups == NULL) return 0;
    if (cfg->capacity_bytes < 0 || cfg->capacity_bytes > ((int64_t)1 << 53)) return 0;
    if (cfg->max_num_batched_tokens < 1 || cfg->max_num_seqs < 1 || cfg->max_model_len < 1) return 0;
    if (cfg->max_model_len > ((int64_t)1 << 40) || cfg->max_num_batched_tokens > ((int64_t)1 << 40)) return 0;
    if (cfg->watermark_blocks < 0) return 0;
    if (cfg->use_fixed_step && !(cfg->fixed_step_seconds >= 0.0 && isfinite(cfg->fixed_step_seconds))) return 0;
    for (int i = 0; i < cfg->ngroups; i++) {
        const fpm_group *g = &cfg->groups[i];
        if (g->kind < FPM_KIND_FULL || g->kind > FPM_KIND_MAMBA) return 0;
        if (g->block < 1 || g->page < 1 || g->page > ((int64_t)1 << 53)) return 0;
        if (is_windowed(g->kind) && g->window < 1) return 0;
        if ((g->kind == FPM_KIND_RING || g->kind == FPM_KIND_MAMBA) && g->blocks_per_request < 1) return 0;
        if (g->blocks_per_request < 0 || g->checkpoint_blocks < 0 || g->checkpoint_blocks > 1 ||
            g->checkpoint_alignment < 0)
            return 0;
        /* every holding of the group stays a 2**53 byte quantity */
        int64_t most = cdiv64(cfg->max_model_len + cfg->max_num_batched_tokens, g->block) + 3 + g->blocks_per_request;
        if (most > (((int64_t)1 << 53) / g->page)) return 0;
    }
    if (cfg->prefix_caching) {
        if (cfg->hash_block_size < 1 || cfg->norigin < 0 || (cfg->norigin > 0 && (!cfg->origin_upto || !cfg->origin_key)))
            return 0;
        for (int i = 0; i < cfg->ngroups; i++) {
            const fpm_group *g = &cfg->groups[i];
            if (g->page != cfg->groups[0].page || is_windowed(g->kind)) return 0;
        }
        if (cfg->capacity_bytes / cfg->groups[0].page >= ((int64_t)1 << 31) - 1) return 0;
    }
    return table_ok(cfg);
}

fpm_status fpm_replay_run(const fpm_replay_config *cfg, const fpm_replay_request *reqs, int64_t n,
                          int32_t mode, fpm_replay_output *out) {
    if (cfg == NULL || out == NULL || n < 0 || (n > 0 && reqs == NULL)) return FPM_EINVAL;
    if (mode != FPM_ARRIVE_STEP && mode != FPM_ARRIVE_TIME) return FPM_EINVAL;
    if (mode == FPM_ARRIVE_TIME && cfg->use_fixed_step) return FPM_EINVAL;
    if (!config_ok(cfg)) return FPM_EINVAL;
    if (out->steps_cap < 0 || out->sched_cap < 0 || out->events_cap < 0 || out->held_cap < 0) return FPM_EINVAL;
    if ((out->steps_cap && !out->steps) || (out->sched_cap && !out->sched) || (out->events_cap && !out->events) ||
        (out->held_cap && !out->held) || (n > 0 && out->requests == NULL))
        return FPM_EINVAL;
    for (int64_t i = 0; i < n; i++) {
        const fpm_replay_request *q = &reqs[i];
        if (q->prompt_len < 1 || q->output_len < 1 || q->arrival_step < 0 || !(q->arrival_time >= 0.0) ||
            !isfinite(q->arrival_time) || q->prompt_len > ((int64_t)1 << 40) || q->output_len > ((int64_t)1 << 40))
            return FPM_EINVAL;
        if (cfg->prefix_caching && (q->own_key < 0 || q->origin_off < 0 || q->origin_len < 0 ||
                                    q->origin_off > cfg->norigin - q->origin_len))
            return FPM_EINVAL;
    }
    out->nsteps = out->nsched = out->nevents = out->nheld = 0;
    memset(&out->totals, 0, sizeof out->totals);
    out->error_code = 0;
    memset(out->err_i, 0, sizeof out->err_i);
    out->err_d = 0.0;

    const int G = cfg->ngroups;
    fpm_status rc = FPM_OK;
    eng_t e;
    memset(&e, 0, sizeof e);
    e.cfg = cfg;
    e.G = G;
    e.block_mode = 1;
    for (int i = 1; i < G; i++)
        if (cfg->groups[i].page != cfg->groups[0].page) e.block_mode = 0;
    e.cap = cfg->capacity_bytes;
    e.usable = e.block_mode ? cfg->capacity_bytes / cfg->groups[0].page : 0;
    e.align_mode = cfg->prefix_caching != 0;
    int has_mamba = 0, all_ckpt = 1;
    int64_t first_align = 0, mamba_block = 0, attn_block = 0;
    for (int i = 0; i < G; i++) {
        const fpm_group *g = &cfg->groups[i];
        if (g->kind == FPM_KIND_MAMBA) {
            if (!has_mamba) {
                first_align = g->checkpoint_alignment;
                mamba_block = g->block;
            }
            has_mamba = 1;
            if (g->checkpoint_blocks < 1) all_ckpt = 0;
        }
        if (is_attn(g->kind) && attn_block == 0) attn_block = g->block;
    }
    e.split = e.align_mode && has_mamba;
    e.ckpt_all = has_mamba && all_ckpt;
    e.first_align = first_align;
    e.sched_block = attn_block ? attn_block : (mamba_block ? mamba_block : 1);
    e.hash_block = cfg->hash_block_size > 0 ? cfg->hash_block_size : e.sched_block;
    e.nreqs = n;
    e.pc = cfg->prefix_caching != 0;
    for (int i = 0; i < G; i++)
        if (cfg->groups[i].kind == FPM_KIND_RING || cfg->groups[i].kind == FPM_KIND_MAMBA)
            e.fixed_bytes += cfg->groups[i].blocks_per_request * cfg->groups[i].page;

    /* working memory, allocated once */
    int64_t nn = n > 0 ? n : 1;
    req_t *rs = calloc((size_t)nn, sizeof(req_t));
    int64_t *hold = calloc((size_t)nn * (size_t)G * 6, sizeof(int64_t));
    int64_t *waitq = calloc((size_t)nn, sizeof(int64_t));
    int64_t *running = calloc((size_t)nn, sizeof(int64_t));
    int64_t *sched_req = calloc((size_t)nn, sizeof(int64_t));
    int64_t *sched_n = calloc((size_t)nn, sizeof(int64_t));
    int64_t *sched_c = calloc((size_t)nn, sizeof(int64_t));
    order_item *order = calloc((size_t)nn, sizeof(order_item));
    lin_ctx lc;
    memset(&lc, 0, sizeof lc);
    int lin_ok = lin_alloc(&lc, max64(cfg->nprefill, cfg->ndecode));
    if (!rs || !hold || !waitq || !running || !sched_req || !sched_n || !sched_c || !order || !lin_ok) {
        rc = FPM_ENOMEM;
        goto done;
    }
    if (e.pc) {
        int64_t blk = 0, maxc = 1;
        for (int i = 0; i < G; i++)
            if (cfg->groups[i].kind == FPM_KIND_FULL && (blk == 0 || cfg->groups[i].block < blk)) blk = cfg->groups[i].block;
        if (blk == 0) blk = e.sched_block;
        for (int64_t i = 0; i < n; i++) {
            int64_t cols = cdiv64(min64(reqs[i].prompt_len + reqs[i].output_len, cfg->max_model_len), blk) + 1;
            if (cols > maxc) maxc = cols;
        }
        e.pool = pc_new_pool(e.usable, G, maxc, min64(n, cfg->max_num_seqs) + 1);
        if (e.pool == NULL) {
            rc = FPM_ENOMEM;
            goto done;
        }
    }
    e.reqs = rs;
    for (int64_t i = 0; i < n; i++) {
        req_t *r = &rs[i];
        r->P = reqs[i].prompt_len;
        r->O = reqs[i].output_len;
        r->slot = -1;
        r->own_key = reqs[i].own_key;
        r->ooff = reqs[i].origin_off;
        r->olen = reqs[i].origin_len;
        int64_t *base = hold + (size_t)i * (size_t)G * 6;
        r->lo = base;
        r->hi = base + G;
        r->state = base + 2 * G;
        r->cols = base + 3 * G;
        r->trans = base + 4 * G;
        r->ckpt = base + 5 * G;
        fpm_request_rec *o = &out->requests[i];
        memset(o, 0, sizeof *o);
        o->arrival_time = o->first_scheduled_time = o->first_token_time = o->finish_time = NAN;
        order[i].in = reqs;
        order[i].idx = i;
        order[i].by_time = mode == FPM_ARRIVE_TIME;
    }
    if (n > 1) qsort(order, (size_t)n, sizeof(order_item), order_cmp);

    int64_t pend = 0;                  /* next index into order */
    int64_t wq_head = 0, wq_len = 0;   /* waiting ring buffer */
    int64_t nrun = 0;
    int64_t k = 0;
    double t = 0.0;
    const int64_t L = cfg->max_model_len;
    for (;;) {
        if (pend >= n && wq_len == 0 && nrun == 0) break;
        if (mode != FPM_ARRIVE_STEP && wq_len == 0 && nrun == 0) {
            double at = reqs[order[pend].idx].arrival_time;
            if (at > t) t = at;
        }
        double t_start = cfg->use_fixed_step ? (double)k * cfg->fixed_step_seconds : t;
        /* The step is built here and copied out when it completes; records
         * beyond a buffer's capacity are counted, not written (FPM_ENOSPC). */
        fpm_step_rec cur;
        memset(&cur, 0, sizeof cur);
        fpm_step_rec *sr = &cur;
        int64_t step_preempted = 0, step_finished = 0;
        sr->event_off = out->nevents;
        sr->sched_off = out->nsched;
        sr->held_off = out->nheld;
#define EVENT(kind_, idx_)                                  \
    do {                                                    \
        if (out->nevents < out->events_cap) {               \
            out->events[out->nevents].kind = (kind_);       \
            out->events[out->nevents].req = (idx_);         \
        }                                                   \
        out->nevents++;                                     \
        step_preempted += (kind_) == FPM_EV_PREEMPTED;      \
        step_finished += (kind_) == FPM_EV_FINISHED;        \
    } while (0)
        /* 1. arrivals */
        while (pend < n) {
            const fpm_replay_request *q = &reqs[order[pend].idx];
            if (mode == FPM_ARRIVE_STEP) {
                if (q->arrival_step > k) break;
            } else if (q->arrival_time > t_start) {
                break;
            }
            int64_t idx = order[pend++].idx;
            fpm_request_rec *o = &out->requests[idx];
            o->arrival_time = mode == FPM_ARRIVE_STEP ? t_start : q->arrival_time;
            if (rs[idx].P >= L) {
                o->status = FPM_RST_REJECTED;
                o->reject_reason = FPM_REJ_PROMPT;
                o->reject_a = rs[idx].P;
                o->reject_b = L;
                EVENT(FPM_EV_REJECTED, idx);
            } else {
                waitq[(wq_head + wq_len) % nn] = idx;
                wq_len++;
            }
        }
        int64_t budget = cfg->max_num_batched_tokens, nsched = 0;
        int preempted = 0;
        if (e.pc) e.pool->stamp = k + 1; /* the Mamba states cached in this step */
        /* 3. running phase */
        int64_t i = 0;
        while (i < nrun && budget > 0) {
            req_t *r = &rs[running[i]];
            int64_t tok = min64(lenof(r) - r->c, budget);
            tok = split(&e, r, r->c, tok);
            if (tok == 0) {
                i++;
                continue;
            }
            int64_t nb, nby, hb;
            if (e.pc) {
                pc_need(&e, r, r->c, r->c + tok, 0, &nb, &hb);
                hb *= cfg->groups[0].page;
            } else {
                project(&e, r, r->c, r->c + tok, &nb, &nby, &hb);
            }
            if (hb > e.cap) {
                out->error_code = FPM_RERR_OVERSIZED;
                out->err_i[0] = hb;
                out->err_i[1] = tok;
                out->err_i[2] = r->c;
                break;
            }
            int ok = 0;
            for (;;) {
                if (try_allocate(&e, r, r->c, r->c + tok, 0, 0)) {
                    ok = 1;
                    break;
                }
                int64_t vi = running[--nrun];
                req_t *v = &rs[vi];
                release_all(&e, v);
                v->c = 0;
                v->preemptions++;
                wq_head = (wq_head + nn - 1) % nn;
                waitq[wq_head] = vi;
                wq_len++;
                EVENT(FPM_EV_PREEMPTED, vi);
                preempted = 1;
                if (v == r) break;
            }
            if (!ok) break;
            sched_req[nsched] = running[i];
            sched_n[nsched] = tok;
            sched_c[nsched] = r->c;
            nsched++;
            budget -= tok;
            i++;
        }
        /* 4. waiting phase (R-18 ... R-22) */
        if (out->error_code == 0 && !preempted) {
            while (budget > 0 && wq_len > 0 && nrun < cfg->max_num_seqs) {
                int64_t idx = waitq[wq_head];
                req_t *r = &rs[idx];
                fpm_request_rec *o = &out->requests[idx];
                int64_t h = 0;
                int same_step = 0;
                if (e.pc) {
                    int64_t junction = 0;
                    h = pc_lookup(&e, r, &junction, &same_step);
                    r->junction = junction;
                }
                /* */
                int64_t nb = fresh_bytes(&e, lenof(r) - 1, lenof(r));
                int rej = 0;
                int64_t ra = 0;
                if (nb > e.cap) {
                    rej = FPM_REJ_FINAL_FORWARD;
                    ra = nb;
                } else if (cfg->reserve_full_isl) {
                    int64_t ibl, iby;
                    input_need(&e, r, 0, &ibl, &iby);
                    if (iby > e.cap) {
                        rej = FPM_REJ_INPUT_SEQ;
                        ra = iby;
                    }
                }
                if (rej) {
                    wq_head = (wq_head + 1) % nn;
                    wq_len--;
                    o->status = FPM_RST_REJECTED;
                    o->reject_reason = rej;
                    o->reject_a = ra;
                    o->reject_b = e.cap;
                    EVENT(FPM_EV_REJECTED, idx);
                    continue;
                }
                int64_t tok = lenof(r) - h;
                if (!cfg->enable_chunked_prefill && tok > budget) break;
                tok = min64(tok, budget);
                tok = split(&e, r, h, tok);
                if (tok == 0) break;
                int64_t pnb, pnby, phb;
                if (e.pc) {
                    pc_need(&e, r, h, h + tok, 1, &pnb, &phb);
                    phb *= cfg->groups[0].page;
                } else {
                    project(&e, r, h, h + tok, &pnb, &pnby, &phb);
                }
                if (phb > e.cap) {
                    out->error_code = FPM_RERR_OVERSIZED;
                    out->err_i[0] = phb;
                    out->err_i[1] = tok;
                    out->err_i[2] = h;
                    break;
                }
                int64_t wm = nrun > 0 ? cfg->watermark_blocks : 0;
                if (same_step) break;
                if (e.pc && cfg->reserve_full_isl) {
                    if (pc_input_need(&e, r, h) + wm > e.pool->qlen) break;
                } else if (cfg->reserve_full_isl) {
                    int64_t ibl, iby;
                    input_need(&e, r, h, &ibl, &iby);
                    if (e.block_mode) {
                        if (ibl + wm > e.usable - e.used_blocks) break;
                    } else if (iby > e.cap - e.used_bytes) {
                        break;
                    }
                }
                if (!try_allocate(&e, r, h, h + tok, e.block_mode ? wm : 0, 1)) break;
                wq_head = (wq_head + 1) % nn;
                wq_len--;
                running[nrun++] = idx;
                r->c = h;
                if (!r->admitted_once) {
                    r->admitted_once = 1;
                    r->hit = h;
                }
                EVENT(FPM_EV_ADMITTED, idx);
                sched_req[nsched] = idx;
                sched_n[nsched] = tok;
                sched_c[nsched] = r->c;
                nsched++;
                budget -= tok;
            }
        }
        if (out->error_code == FPM_RERR_OVERSIZED) {
            out->err_i[3] = e.cap;
            out->err_i[4] = e.fixed_bytes;
            break;
        }
        sr->used_bytes_scheduled = used_bytes_of(&e);
        sr->used_blocks_scheduled = used_blocks_of(&e);
        /* 5./6. step time */
        int64_t np = 0, pt = 0, pkv = 0, nd = 0, dkv = 0;
        for (int64_t s = 0; s < nsched; s++) {
            const req_t *r = &rs[sched_req[s]];
            if (sched_n[s] == 1 && sched_c[s] == lenof(r) - 1 && r->g >= 1) {
                nd++;
                dkv += sched_c[s];
            } else {
                np++;
                pt += sched_n[s];
                pkv += sched_c[s];
            }
        }
        double dur = 0.0;
        int32_t extra = 0;
        if (cfg->use_fixed_step) {
            dur = cfg->fixed_step_seconds;
        } else if (nsched > 0) {
            int32_t missing = -1;
            step_time_ctx(cfg, &lc, np, pt, pkv, nd, dkv, &dur, &extra, &missing);
            if (missing >= 0) {
                out->error_code = FPM_RERR_NO_PHASE;
                out->err_i[0] = missing;
                break;
            }
        }
        double t_end = t_start + dur;
        int stalled = nsched == 0 && !preempted && (nrun > 0 || wq_len > 0);
        for (int64_t s = 0; s < nsched; s++, out->nsched++) {
            if (out->nsched >= out->sched_cap) continue;
            fpm_sched_rec *x = &out->sched[out->nsched];
            x->req = sched_req[s];
            x->tokens = sched_n[s];
            x->computed_before = sched_c[s];
        }
        /* 7. advance, sample, finish */
        for (int64_t s = 0; s < nsched; s++) {
            int64_t idx = sched_req[s];
            req_t *r = &rs[idx];
            fpm_request_rec *o = &out->requests[idx];
            if (isnan(o->first_scheduled_time)) o->first_scheduled_time = t_start;
            r->c += sched_n[s];
            if (r->c == lenof(r)) {
                r->g++;
                if (isnan(o->first_token_time)) o->first_token_time = t_end;
                if (r->g >= r->O || lenof(r) >= L) {
                    o->finish_time = t_end;
                    o->status = FPM_RST_FINISHED;
                    int64_t w = 0;
                    for (int64_t q = 0; q < nrun; q++)
                        if (running[q] != idx) running[w++] = running[q];
                    nrun = w;
                    release_all(&e, r);
                    EVENT(FPM_EV_FINISHED, idx);
                }
            }
        }
        sr->step = k;
        sr->t_start = t_start;
        sr->t_end = t_end;
        sr->duration_s = dur;
        sr->extrapolated = extra;
        sr->sched_len = nsched;
        sr->event_len = out->nevents - sr->event_off;
        sr->num_prefill_requests = np;
        sr->sum_prefill_tokens = pt;
        sr->sum_prefill_kv_tokens = pkv;
        sr->num_decode_requests = nd;
        sr->sum_decode_kv_tokens = dkv;
        sr->running = nrun;
        sr->waiting = wq_len;
        sr->used_bytes_end = used_bytes_of(&e);
        sr->used_blocks_end = used_blocks_of(&e);
        for (int64_t q = 0; q < nrun; q++, out->nheld += 1 + G) {
            if (out->nheld > out->held_cap - (1 + G)) continue;
            int64_t *hp = &out->held[out->nheld];
            hp[0] = running[q];
            for (int gi = 0; gi < G; gi++) hp[1 + gi] = held_count(&e, &rs[running[q]], gi);
        }
        sr->held_len = nrun;
        if (out->nsteps < out->steps_cap) out->steps[out->nsteps] = cur;
        out->nsteps++;
        /* R-35 aggregates of the completed steps */
        fpm_replay_totals *tt = &out->totals;
        if (out->nsteps == 1) tt->first_t_start = t_start;
        tt->last_t_end = t_end;
        tt->preemptions += step_preempted;
        tt->peak_running = max64(tt->peak_running, nrun + step_finished);
        tt->peak_used_bytes = max64(tt->peak_used_bytes, sr->used_bytes_scheduled);
        tt->peak_used_blocks = max64(tt->peak_used_blocks, sr->used_blocks_scheduled);
        tt->extrapolated_steps += extra != 0;
        k++;
        t = t_end;
        if (stalled) {
            if (pend >= n) {
                out->error_code = FPM_RERR_STALL;
                out->err_i[0] = k - 1;
                out->err_i[1] = nrun;
                out->err_i[2] = wq_len;
                out->err_d = t_start;
                break;
            }
            if (mode != FPM_ARRIVE_STEP) {
                double at = reqs[order[pend].idx].arrival_time;
                if (at > t) t = at;
            }
        }
#undef EVENT
    }
    for (int64_t i = 0; i < n; i++) {
        fpm_request_rec *o = &out->requests[i];
        o->output_tokens = rs[i].g;
        o->preemptions = rs[i].preemptions;
        o->prefix_hit_tokens = rs[i].hit;
    }
    if (out->nsteps > out->steps_cap || out->nsched > out->sched_cap || out->nevents > out->events_cap ||
        out->nheld > out->held_cap)
        rc = FPM_ENOSPC;
done:
    free(rs);
    free(hold);
    free(waitq);
    free(running);
    free(sched_req);
    free(sched_n);
    free(sched_c);
    free(order);
    free(lc.kx);
    pc_free_pool(e.pool);
    return rc;
}
