/* The block-count pool of the replay (spec 06 R-4 ... R-10): what each request
 * holds per group, without block identities (prefix caching off).  Mirrors
 * src/fpmcore/replay/pool.py function by function. */
#include <stdint.h>

#include "fpm_internal.h"

static const hold_t ZERO_HOLD[1];

/* The holdings of r in group gi (all zero while r holds nothing). */
static const hold_t *holdings(const engine_t *e, const request_t *r, int gi) {
    return r->slot >= 0 ? hold_of(e, r, gi) : ZERO_HOLD;
}

/* does this Mamba group hold a checkpoint block for c -> a? */
int64_t mamba_checkpoint(const engine_t *e, const request_t *r, const fpm_group *g, int64_t c, int64_t a) {
    if (g->checkpoint_blocks < 1 || g->checkpoint_alignment <= 0) return 0;
    int64_t prefill_end = max64(r->prompt_len, req_len(r) - 1);
    if (a < prefill_end || cdiv64(a, g->block) - 2 < 0) return 0;
    int64_t q = align_pos(a, e->hash_block);
    return checkpoint_valid(c, a, q, e->hash_block, g->block, g->checkpoint_alignment);
}

/* vLLM's admission cap of a windowed group, in blocks
 * (SlidingWindowSpec.max_admission_blocks_per_request; a chunk's:
 * ChunkedLocalAttentionSpec.max_admission_blocks_per_request, the chunk and the in-flight
 * tokens, without an alignment block). */
int64_t window_admission_blocks(const engine_t *e, const fpm_group *g) {
    const fpm_replay_config *cfg = &e->cfg;
    if (g->kind == FPM_KIND_CHUNK) return cdiv64(min64(g->window + cfg->max_num_batched_tokens, cfg->max_model_len), g->block);
    int64_t t = min64(g->window - 1 + cfg->max_num_batched_tokens, cfg->max_model_len);
    return cdiv64(t, g->block) + (cfg->rules.window_cap_exact ? 0 : 1);
}

/* R-4 ... R-6 projection after R-7 step 1: new blocks, new bytes and total held bytes of c -> a. */
void pool_project(const engine_t *e, const request_t *r, int64_t c, int64_t a, int64_t *new_blocks,
                  int64_t *new_bytes, int64_t *held_bytes) {
    int64_t nb = 0, nby = 0, hb = 0;
    ckpt_memo memo = CKPT_MEMO_NONE;
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        const hold_t *h = holdings(e, r, gi);
        int64_t n, held;
        if (g->kind == FPM_KIND_FULL) {
            int64_t hi = cdiv64(a, g->block);
            n = max64(hi - h->hi, 0);
            held = max64(hi, h->hi);
        } else if (is_windowed(g->kind)) {
            int64_t first = window_first(g, c), hi = cdiv64(a, g->block);
            int64_t lo = h->hi > 0 ? max64(first, h->lo) : first;
            n = max64(hi - max64(h->hi, lo), 0);
            held = max64(hi, h->hi) - lo;
        } else if (g->kind == FPM_KIND_MAMBA && e->align_mode) {
            int64_t d = cdiv64(a, g->block) - h->cols;
            int64_t ck = memo_checkpoint(e, r, g, c, a, &memo);
            n = d > 0 ? min64(d, 1 + ck) : 0;
            held = 1 + ((d > 0 && h->state > 0) ? 1 : 0) + ck;
        } else {
            n = h->state == 0 ? g->blocks_per_request : 0;
            held = g->blocks_per_request;
        }
        nb += n;
        nby += n * g->page;
        hb += held * g->page;
    }
    *new_blocks = nb;
    *new_bytes = nby;
    *held_bytes = hb;
}

int64_t pool_held(const engine_t *e, const request_t *r, int gi) {
    const fpm_group *g = &e->cfg.groups[gi];
    const hold_t *h = holdings(e, r, gi);
    if (is_attention(g->kind)) return h->hi - h->lo;
    if (g->kind == FPM_KIND_MAMBA && e->align_mode) return h->state + h->trans + h->ckpt;
    return h->state;
}

static void give_back(engine_t *e, const fpm_group *g, int64_t n) {
    e->used_blocks -= n;
    e->used_bytes -= n * g->page;
}

static void take(engine_t *e, const fpm_group *g, int64_t n) {
    e->used_blocks += n;
    e->used_bytes += n * g->page;
}

/* The fast-path thresholds of r's slot: the fewest tokens at which an
 * attention group needs a new block, and the fewest computed tokens at which
 * a windowed group drops one.  Below both an allocation changes nothing. */
void pool_thresholds(engine_t *e, request_t *r) {
    int64_t grow = INT64_MAX, shrink = INT64_MAX;
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        const hold_t *h = holdings(e, r, gi);
        if (is_attention(g->kind)) grow = min64(grow, h->hi * g->block);
        if (is_windowed(g->kind)) shrink = min64(shrink, window_drop_at(g, h->lo));
    }
    r->grow_at = grow;
    r->shrink_at = shrink;
}

/* R-7 step 1: window blocks below first(c) and align-mode extras; 1 when anything was released. */
int pool_release_skipped(engine_t *e, request_t *r, int64_t c) {
    int released = 0;
    if (r->slot < 0) return 0;
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        hold_t *h = hold_of(e, r, gi);
        if (is_windowed(g->kind)) {
            if (h->hi > 0) {
                int64_t first = window_first(g, c);
                if (first > h->lo) {
                    int64_t drop = min64(first, h->hi) - h->lo;
                    if (drop > 0) {
                        give_back(e, g, drop);
                        h->lo += drop;
                        released = 1;
                    }
                }
            }
        } else if (g->kind == FPM_KIND_MAMBA && e->align_mode) {
            int64_t n = h->trans + h->ckpt;
            if (n) {
                give_back(e, g, n);
                h->trans = 0;
                h->ckpt = 0;
                released = 1;
            }
        }
    }
    return released;
}

/* R-7 step 4: take the projected blocks of c -> a (r has a slot). */
void pool_commit(engine_t *e, request_t *r, int64_t c, int64_t a) {
    ckpt_memo memo = CKPT_MEMO_NONE;
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        hold_t *h = hold_of(e, r, gi);
        if (g->kind == FPM_KIND_FULL) {
            int64_t hi = cdiv64(a, g->block);
            if (hi > h->hi) {
                take(e, g, hi - h->hi);
                h->hi = hi;
            }
        } else if (is_windowed(g->kind)) {
            int64_t first = window_first(g, c), hi = cdiv64(a, g->block);
            if (h->hi == 0) h->lo = h->hi = first;
            if (hi > h->hi) {
                take(e, g, hi - h->hi);
                h->hi = hi;
            }
        } else if (g->kind == FPM_KIND_MAMBA && e->align_mode) {
            int64_t d = cdiv64(a, g->block) - h->cols;
            int64_t ck = memo_checkpoint(e, r, g, c, a, &memo);
            if (d > 0) {
                if (h->state > 0) {
                    h->trans = 1;
                    take(e, g, 1);
                } else {
                    h->state = 1;
                    take(e, g, 1);
                }
                h->cols = cdiv64(a, g->block);
            }
            if (ck) {
                h->ckpt = 1;
                take(e, g, 1);
            }
        } else if (h->state == 0) {
            h->state = g->blocks_per_request;
            take(e, g, g->blocks_per_request);
        }
    }
    pool_thresholds(e, r);
}

/* */
void pool_release_all(engine_t *e, request_t *r) {
    if (r->slot < 0) return;
    for (int gi = 0; gi < e->G; gi++) {
        int64_t n = pool_held(e, r, gi);
        if (n) give_back(e, &e->cfg.groups[gi], n);
        *hold_of(e, r, gi) = ZERO_HOLD[0];
    }
}

/* bytes of c -> a from an empty holding. */
int64_t fresh_bytes(const engine_t *e, int64_t c, int64_t a) {
    int64_t total = 0;
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        int64_t n;
        if (g->kind == FPM_KIND_FULL)
            n = cdiv64(a, g->block);
        else if (is_windowed(g->kind))
            n = cdiv64(a, g->block) - window_first(g, c);
        else if (g->kind == FPM_KIND_MAMBA && e->align_mode)
            n = 1;
        else
            n = g->blocks_per_request;
        total += n * g->page;
    }
    return total;
}

/* blocks and bytes of the whole input sequence from h (an empty holding). */
void input_need(const engine_t *e, const request_t *r, int64_t h, int64_t *blocks, int64_t *bytes) {
    int64_t nt = min64(req_len(r), e->cfg.max_model_len), b = 0, by = 0;
    ckpt_memo memo = CKPT_MEMO_NONE;
    for (int gi = 0; gi < e->G; gi++) {
        const fpm_group *g = &e->cfg.groups[gi];
        int64_t n;
        if (g->kind == FPM_KIND_FULL)
            n = cdiv64(nt, g->block) - h / g->block;
        else if (is_windowed(g->kind))
            n = min64(cdiv64(nt, g->block), window_admission_blocks(e, g)) - h / g->block;
        else if (g->kind == FPM_KIND_MAMBA && e->align_mode)
            n = min64(cdiv64(nt, g->block) - h / g->block, 1 + memo_checkpoint(e, r, g, h, nt, &memo));
        else
            n = g->blocks_per_request;
        n = max64(n, 0);
        b += n;
        by += n * g->page;
    }
    *blocks = b;
    *bytes = by;
}

/* ------------------------------------------------------- sizing (01 §3.5) */

fpm_status fpm_block_range(const fpm_group *g, int64_t computed, int64_t target, int64_t *first, int64_t *end) {
    if (g == NULL || first == NULL || end == NULL || g->block < 1 || computed < 0 || target < computed ||
        target > FPM_MAX_TOKENS)
        return FPM_EINVAL;
    if (g->kind == FPM_KIND_RING || g->kind == FPM_KIND_MAMBA) {
        *first = 0;
        *end = target > 0 ? g->blocks_per_request : 0;
        return FPM_OK;
    }
    if (g->kind != FPM_KIND_FULL && !is_windowed(g->kind)) return FPM_EINVAL;
    if (is_windowed(g->kind) && (g->window < 1 || g->window > FPM_MAX_TOKENS)) return FPM_EINVAL;
    *end = cdiv64(target, g->block);
    *first = (g->kind == FPM_KIND_FULL) ? 0 : window_first(g, computed);
    return FPM_OK;
}

fpm_status fpm_peak_request_blocks(const fpm_group *g, int64_t context, int64_t max_num_tokens, int64_t *out) {
    if (g == NULL || out == NULL || g->block < 1 || context < 1 || max_num_tokens < 1 || context > FPM_MAX_TOKENS ||
        max_num_tokens > FPM_MAX_TOKENS)
        return FPM_EINVAL;
    if (g->kind == FPM_KIND_RING || g->kind == FPM_KIND_MAMBA) {
        *out = g->blocks_per_request;
    } else if (g->kind == FPM_KIND_FULL) {
        *out = cdiv64(context, g->block);
    } else if (is_windowed(g->kind)) {
        if (g->window < 1 || g->window > FPM_MAX_TOKENS || g->block > FPM_MAX_TOKENS) return FPM_EINVAL;
        if (g->kind == FPM_KIND_CHUNK)
            *out = cdiv64(min64(g->window + max_num_tokens, context), g->block);
        else
            *out = min64(cdiv64(context, g->block), cdiv64(g->window - 1 + max_num_tokens + g->block - 1, g->block));
    } else {
        return FPM_EINVAL;
    }
    return FPM_OK;
}
