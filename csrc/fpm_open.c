/* Opening and closing a replay (fpm_replay_open, fpm_replay_close): the
 * config and the requests checked against the header's bounds, the settings
 * the engine derives once, its working memory and the order of arrival.
 * Mirrors the start of run_reference in src/fpmcore/replay/reference.py. */
#include <math.h>
#include <stdlib.h>

#include "fpm_internal.h"

static int config_ok(const fpm_replay_config *cfg) {
    if (cfg->ngroups < 1 || cfg->groups == NULL) return 0;
    if (cfg->capacity_bytes < 0 || cfg->capacity_bytes > FPM_MAX_BYTES) return 0;
    if (cfg->max_num_batched_tokens < 1 || cfg->max_num_seqs < 1 || cfg->max_model_len < 1) return 0;
    if (cfg->max_model_len > FPM_MAX_TOKENS || cfg->max_num_batched_tokens > FPM_MAX_TOKENS ||
        cfg->max_num_seqs > FPM_MAX_TOKENS)
        return 0;
    if (cfg->max_num_scheduled_tokens < 0 || cfg->max_num_scheduled_tokens > FPM_MAX_TOKENS) return 0;
    if (cfg->max_num_active_seqs < 0 || cfg->max_num_active_seqs > cfg->max_num_seqs) return 0;
    if (cfg->long_prefill_token_threshold < 0 || cfg->long_prefill_token_threshold > FPM_MAX_TOKENS) return 0;
    if (cfg->prefill_schedule_interval < 0 || cfg->prefill_schedule_interval > FPM_MAX_ARRIVAL_STEP) return 0;
    if (cfg->policy != FPM_POLICY_FCFS && cfg->policy != FPM_POLICY_PRIORITY) return 0;
    if (cfg->max_num_queued_reqs > FPM_MAX_TOKENS || cfg->max_num_queued_tokens > FPM_MAX_BYTES) return 0;
    if (cfg->max_steps < 0 || cfg->max_steps > FPM_MAX_STEPS) return 0;
    if (cfg->watermark_blocks < 0 || cfg->watermark_blocks > FPM_MAX_BYTES) return 0;
    if (cfg->use_fixed_step && !(cfg->fixed_step_seconds >= 0.0 && isfinite(cfg->fixed_step_seconds))) return 0;
    /* the most tokens one step schedules */
    int64_t budget = cfg->max_num_batched_tokens;
    if (cfg->rules.budget_scheduled_only && cfg->max_num_scheduled_tokens > budget) budget = cfg->max_num_scheduled_tokens;
    int64_t fixed = 0;
    for (int i = 0; i < cfg->ngroups; i++) {
        const fpm_group *g = &cfg->groups[i];
        if (cfg->rules.no_ring_groups && g->kind == FPM_KIND_RING) return 0;
        if (cfg->rules.no_mamba_checkpoints && g->checkpoint_blocks > 0) return 0;
        if (g->kind < FPM_KIND_FULL || g->kind > FPM_KIND_CHUNK) return 0;
        if (g->block < 1 || g->block > FPM_MAX_TOKENS || g->page < 1 || g->page > FPM_MAX_BYTES) return 0;
        if (g->window < 0 || g->window > FPM_MAX_TOKENS || (is_windowed(g->kind) && g->window < 1)) return 0;
        if (g->blocks_per_request < 0 || g->blocks_per_request > FPM_MAX_TOKENS) return 0;
        if ((g->kind == FPM_KIND_RING || g->kind == FPM_KIND_MAMBA) && g->blocks_per_request < 1) return 0;
        if (g->checkpoint_blocks < 0 || g->checkpoint_blocks > 1 || g->checkpoint_alignment < 0 ||
            g->checkpoint_alignment > FPM_MAX_TOKENS)
            return 0;
        /* every holding of the group stays a 2**53 byte quantity */
        int64_t most = cdiv64(cfg->max_model_len + budget, g->block) + 3 + g->blocks_per_request;
        if (most > FPM_MAX_BYTES / g->page) return 0;
        /* the fixed state bytes of a request, summed in group order */
        if (g->kind == FPM_KIND_RING || g->kind == FPM_KIND_MAMBA) {
            fixed += g->blocks_per_request * g->page;
            if (fixed > FPM_MAX_BYTES) return 0;
        }
    }
    if (cfg->prefix_caching) {
        if (cfg->hash_block_size < 1 || cfg->hash_block_size > FPM_MAX_TOKENS || cfg->norigin < 0 ||
            (cfg->norigin > 0 && (!cfg->origin_upto || !cfg->origin_key)))
            return 0;
        for (int i = 0; i < cfg->ngroups; i++)
            if (cfg->groups[i].page != cfg->groups[0].page) return 0;
        if (cfg->capacity_bytes / cfg->groups[0].page >= ((int64_t)1 << 31) - 1) return 0;
    }
    return table_ok(cfg);
}

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

void fpm_replay_close(fpm_replay *e) {
    if (e == NULL) return;
    free(e->req_block);
    free(e->info);
    free(e->order);
    free(e->wq);
    free(e->running);
    free(e->hold);
    free(e->free_slot);
    free(e->sched_req);
    free(e->sched_n);
    free(e->sched_c);
    free(e->ev);
    free(e->done_list);
    free(e->ckpt_class);
    lin_free(&e->lc);
    pc_free(e->pool);
    free(e);
}

/* Every request within the header's bounds (FPM_EINVAL otherwise). */
static int requests_ok(const fpm_replay_config *cfg, const fpm_replay_request *reqs, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        const fpm_replay_request *q = &reqs[i];
        if (q->prompt_len < 1 || q->output_len < 1 || q->prompt_len > FPM_MAX_TOKENS || q->output_len > FPM_MAX_TOKENS)
            return 0;
        if (q->arrival_step < 0 || q->arrival_step > FPM_MAX_ARRIVAL_STEP) return 0;
        if (!(q->arrival_time >= 0.0) || !isfinite(q->arrival_time)) return 0;
        if (q->priority < -FPM_MAX_PRIORITY || q->priority > FPM_MAX_PRIORITY) return 0;
        if (cfg->prefix_caching && (q->own_key < 0 || q->origin_off < 0 || q->origin_len < 0 ||
                                    q->origin_off > cfg->norigin - q->origin_len))
            return 0;
    }
    return 1;
}

/* What the engine derives once from the config: the pool's mode and size,
 * the align split's blocks, the step's budgets and limits. */
static void derive_settings(engine_t *e) {
    const fpm_replay_config *cfg = &e->cfg;
    const int G = cfg->ngroups;
    e->G = G;
    e->block_mode = 1;
    for (int i = 1; i < G; i++)
        if (cfg->groups[i].page != cfg->groups[0].page) e->block_mode = 0;
    e->cap = cfg->capacity_bytes;
    e->usable = e->block_mode ? cfg->capacity_bytes / cfg->groups[0].page : 0;
    e->align_mode = e->pc = cfg->prefix_caching != 0;
    int has_mamba = 0, all_ckpt = 1;
    int64_t mamba_block = 0, attn_block = 0;
    for (int i = 0; i < G; i++) {
        const fpm_group *g = &cfg->groups[i];
        if (g->kind == FPM_KIND_MAMBA) {
            if (!has_mamba) {
                e->first_align = g->checkpoint_alignment;
                mamba_block = g->block;
            }
            has_mamba = 1;
            if (g->checkpoint_blocks < 1) all_ckpt = 0;
        }
        if (is_attention(g->kind) && attn_block == 0) attn_block = g->block;
        if (is_windowed(g->kind)) e->has_windowed = 1;
        if (g->kind == FPM_KIND_RING || g->kind == FPM_KIND_MAMBA) e->fixed_bytes += g->blocks_per_request * g->page;
    }
    e->split = e->align_mode && has_mamba;
    e->ckpt_all = has_mamba && all_ckpt;
    e->sched_block = attn_block ? attn_block : (mamba_block ? mamba_block : 1);
    e->hash_block = cfg->hash_block_size > 0 ? cfg->hash_block_size : e->sched_block;
    e->token_budget = cfg->max_num_scheduled_tokens <= 0 ? cfg->max_num_batched_tokens
                      : cfg->rules.budget_scheduled_only ? cfg->max_num_scheduled_tokens
                                                          : min64(cfg->max_num_scheduled_tokens, cfg->max_num_batched_tokens);
    e->split_limit = cfg->max_num_scheduled_tokens > 0 ? cfg->max_num_scheduled_tokens : cfg->max_num_batched_tokens;
    if (cfg->long_prefill_token_threshold > 0) e->split_limit = min64(e->split_limit, cfg->long_prefill_token_threshold);
    e->active_limit = cfg->max_num_active_seqs > 0 ? cfg->max_num_active_seqs : cfg->max_num_seqs;
    e->interval = cfg->prefill_schedule_interval > 1 ? cfg->prefill_schedule_interval : 1;
    e->last_prefill_step = -e->interval;
    e->max_steps = cfg->max_steps > 0 ? cfg->max_steps : FPM_MAX_STEPS;
    e->nslots = min64(e->n, cfg->max_num_seqs) + 1;
}

/* The engine's working memory: per request, per slot, per step; 0 when an
 * allocation fails (fpm_replay_close frees what was taken). */
static int allocate_state(engine_t *e) {
    int64_t nn = e->n > 0 ? e->n : 1, slots = e->nslots;
    e->req = fpm_calloc_lines(nn, sizeof(request_t), &e->req_block);
    e->info = fpm_calloc(nn, sizeof(request_info_t));
    e->order = fpm_calloc(nn, sizeof(int64_t));
    e->wq = fpm_calloc(nn, sizeof(int64_t));
    e->done_list = fpm_calloc(nn, sizeof(int64_t));
    e->running = fpm_calloc(slots, sizeof(int64_t));
    e->hold = (slots > INT64_MAX / e->G) ? NULL : fpm_calloc(slots * e->G, sizeof(hold_t));
    e->free_slot = fpm_calloc(slots, sizeof(int64_t));
    e->sched_req = fpm_calloc(slots, sizeof(int64_t));
    e->sched_n = fpm_calloc(slots, sizeof(int64_t));
    e->sched_c = fpm_calloc(slots, sizeof(int64_t));
    e->ev_cap = nn + 3 * slots;
    e->ev = fpm_calloc(e->ev_cap, sizeof(fpm_event_rec));
    e->ckpt_class = fpm_calloc(e->G, sizeof(int32_t));
    if (e->ckpt_class) {
        for (int gi = 0; gi < e->G; gi++) {
            const fpm_group *g = &e->cfg.groups[gi];
            int cls = gi;
            for (int gj = 0; gj < gi && cls == gi; gj++) {
                const fpm_group *h = &e->cfg.groups[gj];
                if (h->block == g->block && h->checkpoint_blocks == g->checkpoint_blocks &&
                    h->checkpoint_alignment == g->checkpoint_alignment)
                    cls = gj;
            }
            e->ckpt_class[gi] = cls;
        }
    }
    return e->req && e->info && e->order && e->wq && e->done_list && e->running && e->hold &&
           e->free_slot && e->sched_req && e->sched_n && e->sched_c && e->ev && e->ckpt_class &&
           lin_prepare(&e->lc, &e->cfg);
}

/* the prefix-caching pool, its block tables as wide as the longest request; 0 on ENOMEM. */
static int open_prefix_pool(engine_t *e) {
    int64_t maxc = 1;
    for (int64_t i = 0; i < e->n; i++) {
        int64_t len = min64(e->in[i].prompt_len + e->in[i].output_len, e->cfg.max_model_len);
        maxc = max64(maxc, cdiv64(len, e->sched_block) + 1);
    }
    e->pool = pc_new(e, maxc);
    if (e->pool == NULL) return 0;
    e->pc_free = pc_free_queue_length(e->pool);
    return 1;
}

/* Every slot free.  The requests' entries stay untouched (all zero) until each arrives (arrive_request):
 * a large trace's per-request state takes memory only from its arrival on, and fpm_replay_advance gives
 * it back when the request completed (release_completed). */
static void reset_requests(engine_t *e) {
    for (int64_t i = 0; i < e->nslots; i++) e->free_slot[i] = e->nslots - 1 - i;
    e->nfree_slot = e->nslots;
}

/* the order of arrival (by step or time, then by index) into e->order; 0 on ENOMEM. */
static int sort_arrivals(engine_t *e) {
    order_item *order = fpm_calloc(e->n > 0 ? e->n : 1, sizeof(order_item));
    if (order == NULL) return 0;
    for (int64_t i = 0; i < e->n; i++) {
        order[i].in = e->in;
        order[i].idx = i;
        order[i].by_time = e->mode == FPM_ARRIVE_TIME;
    }
    if (e->n > 1) qsort(order, (size_t)e->n, sizeof(order_item), order_cmp);
    for (int64_t i = 0; i < e->n; i++) e->order[i] = order[i].idx;
    free(order);
    return 1;
}

fpm_status fpm_replay_open(const fpm_replay_config *cfg, const fpm_replay_request *reqs, int64_t n, int32_t mode,
                           fpm_replay **out) {
    if (out == NULL) return FPM_EINVAL;
    *out = NULL;
    if (cfg == NULL || n < 0 || (n > 0 && reqs == NULL)) return FPM_EINVAL;
    if (mode != FPM_ARRIVE_STEP && mode != FPM_ARRIVE_TIME) return FPM_EINVAL;
    if (mode == FPM_ARRIVE_TIME && cfg->use_fixed_step) return FPM_EINVAL;
    if (!config_ok(cfg) || !requests_ok(cfg, reqs, n)) return FPM_EINVAL;
    engine_t *e = calloc(1, sizeof(engine_t));
    if (e == NULL) return FPM_ENOMEM;
    e->cfg = *cfg;
    e->in = reqs;
    e->n = n;
    e->mode = mode;
    derive_settings(e);
    if (!allocate_state(e) || (e->pc && !open_prefix_pool(e)) || !sort_arrivals(e)) {
        fpm_replay_close(e);
        return FPM_ENOMEM;
    }
    reset_requests(e);
    e->ended = n == 0;
    *out = e;
    return FPM_OK;
}
