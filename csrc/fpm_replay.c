/* The replay's scheduler loop (spec 06 R-11 ... R-26): vLLM's synchronous
 * Scheduler.schedule() and update_from_output() step by step, with the
 * scheduler settings of vLLM that change what is scheduled.  Mirrors
 * src/fpmcore/replay/reference.py phase by phase, under the same names:
 *
 *   enqueue_arrivals   , max_num_queued_*
 *   begin_step         : budgets, long-prefill cap, prefill cadence
 *   schedule_running   
 *   schedule_waiting    R-18 ... R-22
 *   step_duration      
 *   finish_step         R-23
 *   record_step         totals
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fpm_internal.h"

/* ------------------------------------------------------------ stops */

/* The replay stopped in this step: a stop of the replay (R-9, R-26, R-27, the
 * step limit), or an allocation that failed. */
static int halted(const engine_t *e) { return e->stop != 0 || e->failure != FPM_OK; }

/* Does the last step have records?  A step that ran and stalled has;
 * a step that stopped inside it (or failed) has none. */
static int step_recorded(const engine_t *e) {
    return e->failure == FPM_OK && (e->stop == 0 || e->stop == FPM_RERR_STALL);
}

/* ------------------------------------------------------------ pool dispatch */

static int64_t held_count(const engine_t *e, const request_t *r, int gi) {
    return e->pc ? pc_held(e, r, gi) : pool_held(e, r, gi);
}

/* R-9's projection of r's holding for c -> a (hits: a waiting head): the blocks and bytes it takes
 * (with caching: blocks from the free queue) and the blocks (with caching) or bytes it then holds */
typedef struct {
    int64_t blocks, bytes, held;
} projection;

static void project(const engine_t *e, const request_t *r, int64_t c, int64_t a, int hits, projection *pr) {
    pr->bytes = 0;
    if (e->pc)
        pc_need(e, r, c, a, hits, &pr->blocks, &pr->held);
    else
        pool_project(e, r, c, a, &pr->blocks, &pr->bytes, &pr->held);
}

/* the bytes of r's complete holding for c -> a */
static int64_t projected_bytes(const engine_t *e, const projection *pr) {
    return e->pc ? pr->held * e->cfg.groups[0].page : pr->held;
}

/* R-7 step 1; 1 when it released anything */
static int release_skipped(engine_t *e, request_t *r, int64_t c) {
    return e->pc ? pc_release_skipped(e, r, c) : pool_release_skipped(e, r, c);
}

#ifdef FPM_CHECK_INVARIANTS
/* With prefix caching, a running request's projection known of c -> a still stands after R-7 step 1. */
static void check_projection_stands(const engine_t *e, const request_t *r, int64_t c, int64_t a,
                                    const projection *known) {
    projection again;
    project(e, r, c, a, 0, &again);
    if (again.blocks != known->blocks || again.held != known->held) abort();
}
#else
static inline void check_projection_stands(const engine_t *e, const request_t *r, int64_t c, int64_t a,
                                           const projection *known) {
    (void)e;
    (void)r;
    (void)c;
    (void)a;
    (void)known;
}
#endif

/* release first, project, check, commit all groups or nothing.  known: the projection of c -> a
 * computed before, kept true here: it stands unless the release frees something (r's projection does not
 * depend on the other requests, so it also stands while they are preempted), and when the release does
 * free something it is taken again and stored back for the next attempt.  With prefix caching a running
 * request's projection stands even then: pc_need already counts its holding as the release leaves it (the
 * window blocks from window_first(c), the Mamba states from the release bound), so it is not taken again
 * (builds with FPM_CHECK_INVARIANTS take it again and compare). */
static int try_allocate(engine_t *e, request_t *r, int64_t c, int64_t a, int64_t watermark, int hits,
                        projection *known) {
    int before = e->cfg.rules.check_before_release;
    if (!before && release_skipped(e, r, c)) {
        if (!e->pc || hits)
            project(e, r, c, a, hits, known);
        else
            check_projection_stands(e, r, c, a, known);
    }
    if (e->pc) {
        if (known->blocks > pc_free_count(e) - watermark) return 0;
        if (before) release_skipped(e, r, c);
        if (!pc_commit(e, r, c, a, hits)) e->failure = FPM_ENOMEM;
        return 1;
    }
    int64_t nb = known->blocks, nby = known->bytes;
    if (e->block_mode) {
        if (nb > e->usable - e->used_blocks - watermark) return 0;
    } else if (nby > e->cap - e->used_bytes) {
        return 0;
    }
    if (before) release_skipped(e, r, c);
    if (r->slot < 0) r->slot = (int32_t)e->free_slot[--e->nfree_slot];
    pool_commit(e, r, c, a);
    return 1;
}

/* */
static void release_all(engine_t *e, request_t *r) {
    if (r->slot < 0) return;
    if (e->pc) {
        pc_release_all(e, r);
        return;
    }
    pool_release_all(e, r);
    e->free_slot[e->nfree_slot++] = r->slot;
    r->slot = -1;
}

/* 04 G-2 ... G-6 with the deployment's Mamba groups (R-§4): the align query of a chunk inside the prefill */
static int64_t align_split(const engine_t *e, const request_t *r, int64_t start, int64_t n) {
    fpm_align_query q;
    memset(&q, 0, sizeof q);
    q.start = start;
    q.num_new_tokens = n;
    q.prompt_len = r->prompt_len;
    q.num_tokens = req_len(r);
    q.block_size = e->sched_block;
    q.hash_block_size = e->hash_block;
    q.max_num_batched_tokens = e->split_limit;
    q.checkpoint_alignment = (e->ckpt_all && e->first_align > 0) ? e->first_align : 0;
    q.junction = e->info[r - e->req].junction;
    q.last_stop_at_tokens = e->cfg.rules.align_last_stop_at_tokens;
    return align_stop(&q);
}

/* 04 G-2 ... G-6: align_stop keeps a chunk that starts past the prefill as it is */
static inline int64_t split(const engine_t *e, const request_t *r, int64_t start, int64_t n) {
    if (!e->split || start >= max64(r->prompt_len, req_len(r) - 1)) return n;
    return align_split(e, r, start, n);
}

/* ------------------------------------------------------------ events */

static void event(engine_t *e, int32_t kind, int64_t idx) {
    e->ev[e->nev].kind = kind;
    e->ev[e->nev].req = idx;
    e->nev++;
    e->step_preempted += kind == FPM_EV_PREEMPTED;
    e->step_finished += kind == FPM_EV_FINISHED;
}

/* A request completes: it leaves the front end's counts (max_num_queued_*). */
static void complete(engine_t *e, request_t *r) {
    e->done_list[e->ndone++] = r - e->req;
    e->completed++;
    e->unfinished--;
    if (r->generated == 0) e->queued_tokens -= r->prompt_len;
}

static void reject(engine_t *e, request_t *r, int32_t reason, int64_t a, int64_t b) {
    request_info_t *ri = &e->info[r - e->req];
    r->status = FPM_RST_REJECTED;
    ri->reject_reason = reason;
    ri->reject_a = a;
    ri->reject_b = b;
    event(e, FPM_EV_REJECTED, r - e->req);
}

/* ------------------------------------------------------------ the phases */

/* A request's entry, written at its arrival: no slot, no times yet. */
static request_t *arrive_request(engine_t *e, int64_t idx) {
    request_t *r = &e->req[idx];
    r->prompt_len = e->in[idx].prompt_len;
    r->output_len = e->in[idx].output_len;
    r->slot = -1;
    r->arrived = 1;
    request_info_t *ri = &e->info[idx];
    ri->arrival_time = ri->first_scheduled_time = ri->first_token_time = ri->finish_time = NAN;
    return r;
}

/* and vLLM's front-end admission (max_num_queued_reqs, max_num_queued_tokens) */
static void enqueue_arrivals(engine_t *e) {
    while (e->pend < e->n) {
        int64_t idx = e->order[e->pend];
        const fpm_replay_request *q = &e->in[idx];
        if (e->mode == FPM_ARRIVE_STEP) {
            if (q->arrival_step > e->k) break;
        } else if (q->arrival_time > e->t_start) {
            break;
        }
        e->pend++;
        request_t *r = arrive_request(e, idx);
        e->info[idx].arrival_time = e->mode == FPM_ARRIVE_STEP ? e->t_start : q->arrival_time;
        const fpm_replay_config *cfg = &e->cfg;
        if (cfg->max_num_queued_reqs >= 0 && e->unfinished + 1 > cfg->max_num_queued_reqs) {
            reject(e, r, FPM_REJ_QUEUED_REQS, e->unfinished, cfg->max_num_queued_reqs);
        } else if (cfg->max_num_queued_tokens >= 0 && e->queued_tokens >= cfg->max_num_queued_tokens) {
            reject(e, r, FPM_REJ_QUEUED_TOKENS, e->queued_tokens, cfg->max_num_queued_tokens);
        } else if (r->prompt_len >= cfg->max_model_len) {
            reject(e, r, FPM_REJ_PROMPT, r->prompt_len, cfg->max_model_len);
        } else {
            e->info[idx].arrival_seq = e->pend;
            e->unfinished++;
            e->queued_tokens += r->prompt_len;
            waiting_push_back(e, idx);
            continue;
        }
        e->done_list[e->ndone++] = idx;
        e->completed++;
    }
}

/* the step's budget, long-prefill cap and prefill cadence */
static void begin_step(engine_t *e) {
    const fpm_replay_config *cfg = &e->cfg;
    e->budget = e->token_budget;
    e->preempted = e->prefill_scheduled = e->prefill_admitted = 0;
    e->nsched = 0;
    e->np = e->pt = e->pkv = e->nd = e->dkv = 0;
    int64_t eligible = e->nrun + e->wq_len;
    e->threshold = (eligible > 1 || cfg->rules.long_prefill_cap_always) ? cfg->long_prefill_token_threshold : 0;
    if (e->threshold > 0 && cfg->long_prefill_adaptive && eligible > 0)
        e->threshold = max64(e->threshold, cfg->max_num_batched_tokens / eligible);
    e->defer = 0;
    if (e->interval > 1 && !e->capacity_bound && (e->executed + 1) - e->last_prefill_step < e->interval) {
        for (int64_t i = 0; i < e->nrun; i++)
            if (!e->req[e->running[i]].prefill_chunk) {
                e->defer = 1;
                break;
            }
    }
    if (e->pc) pc_new_step(e);
}

/* a scheduled entry is a decode entry iff it computes the last token of a request that sampled one */
static inline int is_decode(const request_t *r, int64_t n, int64_t c) {
    return n == 1 && c == req_len(r) - 1 && r->generated >= 1;
}

static inline void schedule(engine_t *e, int64_t idx, int64_t n, int64_t c) {
    e->sched_req[e->nsched] = idx;
    e->sched_n[e->nsched] = n;
    e->sched_c[e->nsched] = c;
    e->nsched++;
    e->budget -= n;
    if (is_decode(&e->req[idx], n, c)) {
        e->nd++;
        e->dkv += c;
    } else {
        e->np++;
        e->pt += n;
        e->pkv += c;
    }
}

static void oversized(engine_t *e, int64_t bytes, int64_t n, int64_t c) {
    e->stop = FPM_RERR_OVERSIZED;
    e->err_i[0] = bytes;
    e->err_i[1] = n;
    e->err_i[2] = c;
    e->err_i[3] = e->cap;
    e->err_i[4] = e->fixed_bytes;
}

/* the preemption victim for r's failed allocation; returns its position in running */
static int64_t victim(const engine_t *e) {
    if (e->cfg.policy != FPM_POLICY_PRIORITY) return e->nrun - 1;
    int64_t best = 0;
    for (int64_t i = 1; i < e->nrun; i++) {
        const fpm_replay_request *x = &e->in[e->running[i]], *y = &e->in[e->running[best]];
        if (x->priority > y->priority ||
            (x->priority == y->priority && e->info[e->running[i]].arrival_seq > e->info[e->running[best]].arrival_seq))
            best = i;
    }
    return best;
}

/* preempt running[pos] (recompute), push it back to waiting */
static void preempt(engine_t *e, int64_t pos) {
    int64_t vi = e->running[pos];
    memmove(&e->running[pos], &e->running[pos + 1], (size_t)(e->nrun - pos - 1) * sizeof(int64_t));
    e->nrun--;
    request_t *v = &e->req[vi];
    release_all(e, v);
    v->computed = 0;
    e->info[vi].preemptions++;
    waiting_push_front(e, vi);
    event(e, FPM_EV_PREEMPTED, vi);
    e->preempted = 1;
}

/* Remove a request preempted in this step from the step's scheduled entries
 * (priority policy: the victim may have been scheduled already); was it scheduled? */
static int unschedule(engine_t *e, int64_t idx) {
    for (int64_t s = 0; s < e->nsched; s++) {
        if (e->sched_req[s] != idx) continue;
        e->budget += e->sched_n[s];
        if (is_decode(&e->req[idx], e->sched_n[s], e->sched_c[s])) {
            e->nd--;
            e->dkv -= e->sched_c[s];
        } else {
            e->np--;
            e->pt -= e->sched_n[s];
            e->pkv -= e->sched_c[s];
        }
        int64_t rest = e->nsched - s - 1;
        memmove(&e->sched_req[s], &e->sched_req[s + 1], (size_t)rest * sizeof(int64_t));
        memmove(&e->sched_n[s], &e->sched_n[s + 1], (size_t)rest * sizeof(int64_t));
        memmove(&e->sched_c[s], &e->sched_c[s + 1], (size_t)rest * sizeof(int64_t));
        e->nsched--;
        return 1;
    }
    return 0;
}

/* R-14 for the running requests from position i on, as long as each one's chunk stays inside the
 * blocks it holds (the fast path: no pool change), the step's counts kept in locals; returns the
 * position of the first request whose chunk needs the pool, or where the list or the budget ends. */
static int64_t schedule_held(engine_t *e, int64_t i) {
    const int64_t nrun = e->nrun, threshold = e->threshold, *running = e->running;
    const request_t *req = e->req;
    const int defer = e->defer;
    int64_t *sreq = e->sched_req, *sn = e->sched_n, *sc = e->sched_c;
    int64_t budget = e->budget, ns = e->nsched, np = e->np, pt = e->pt, pkv = e->pkv, nd = e->nd, dkv = e->dkv;
    int prefill = e->prefill_scheduled;
    for (; i < nrun && budget > 0; i++) {
        int64_t idx = running[i];
        const request_t *r = &req[idx];
        if (defer && r->prefill_chunk) continue;
        int64_t c = r->computed, len = req_len(r), n = len - c;
        if (n == 1 && r->generated >= 1) {
            /* a decode entry (is_decode): one token, which no cap, budget (> 0) or align split shortens */
            if (c + 1 > r->grow_at || c >= r->shrink_at) break;
            prefill |= r->prefill_chunk;
            sreq[ns] = idx;
            sn[ns] = 1;
            sc[ns] = c;
            ns++;
            budget--;
            nd++;
            dkv += c;
            continue;
        }
        if (threshold > 0 && threshold < n) n = threshold;
        n = min64(n, budget);
        n = split(e, r, c, n);
        if (n == 0) continue;
        if (c + n > r->grow_at || c >= r->shrink_at) break;
        prefill |= r->prefill_chunk;
        sreq[ns] = idx;
        sn[ns] = n;
        sc[ns] = c;
        ns++;
        budget -= n;
        if (n == 1 && c == len - 1 && r->generated >= 1) { /* is_decode */
            nd++;
            dkv += c;
        } else {
            np++;
            pt += n;
            pkv += c;
        }
    }
    e->budget = budget;
    e->nsched = ns;
    e->np = np;
    e->pt = pt;
    e->pkv = pkv;
    e->nd = nd;
    e->dkv = dkv;
    e->prefill_scheduled = prefill;
    return i;
}

/* */
static void schedule_running(engine_t *e) {
    int64_t i = 0;
    for (;;) {
        i = schedule_held(e, i);
        if (i >= e->nrun || e->budget <= 0) return;
        /* running[i]'s chunk needs the pool */
        int64_t idx = e->running[i];
        request_t *r = &e->req[idx];
        int64_t c = r->computed, n = req_len(r) - c;
        if (e->threshold > 0 && e->threshold < n) n = e->threshold;
        n = min64(n, e->budget);
        n = split(e, r, c, n);
        if (e->pc && c + n - r->grow_at <= (int64_t)r->fill_only && c < r->shrink_at) {
            /* the chunk only fills blocks: nothing to project, release, take or preempt */
            if (!pc_fill_blocks(e, r, c, c + n)) e->failure = FPM_ENOMEM;
            if (halted(e)) return;
            e->prefill_scheduled |= r->prefill_chunk;
            schedule(e, idx, n, c);
            i++;
            continue;
        }
        projection pr;
        project(e, r, c, c + n, 0, &pr);
        int64_t hb = projected_bytes(e, &pr);
        if (hb > e->cap) {
            oversized(e, hb, n, c);
            return;
        }
        int ok = 0, self = 0;
        for (;;) { /* r's projection stands while others are preempted */
            if (try_allocate(e, r, c, c + n, 0, 0, &pr)) {
                ok = 1;
                break;
            }
            int64_t pos = victim(e);
            int64_t vi = e->running[pos];
            int was_scheduled = unschedule(e, vi);
            if (pos < i && (was_scheduled || !e->cfg.rules.priority_shift_if_scheduled)) i--;
            preempt(e, pos);
            if (vi == idx) {
                self = 1;
                break;
            }
        }
        if (halted(e)) return;
        if (!ok) {
            if (self && e->cfg.policy == FPM_POLICY_PRIORITY && !e->cfg.rules.priority_self_preemption_stops)
                continue; /* i already points at the next request */
            return;
        }
        e->prefill_scheduled |= r->prefill_chunk;
        schedule(e, idx, n, c);
        i++;
    }
}

/* R-18 ... R-22 */
static void schedule_waiting(engine_t *e) {
    const fpm_replay_config *cfg = &e->cfg;
    while (e->budget > 0 && e->wq_len > 0 && e->nrun < e->active_limit) {
        int64_t idx = waiting_head(e);
        request_t *r = &e->req[idx];
        int64_t len = req_len(r), h = 0;
        int same_step = 0;
        if (e->pc) h = pc_lookup(e, r, &same_step);
        /* */
        int64_t nb = fresh_bytes(e, len - 1, len);
        int32_t rej = 0;
        int64_t ra = 0;
        if (nb > e->cap) {
            rej = FPM_REJ_FINAL_FORWARD;
            ra = nb;
        } else if (cfg->reserve_full_isl) {
            int64_t ibl, iby;
            input_need(e, r, 0, &ibl, &iby);
            if (iby > e->cap) {
                rej = FPM_REJ_INPUT_SEQ;
                ra = iby;
            }
        }
        if (rej) {
            waiting_pop(e);
            reject(e, r, rej, ra, e->cap);
            complete(e, r);
            continue;
        }
        if (e->defer && h < len - 1) break;
        int64_t n = len - h;
        if (e->threshold > 0 && e->threshold < n) n = e->threshold;
        if (!cfg->enable_chunked_prefill && n > e->budget) break;
        n = min64(n, e->budget);
        n = split(e, r, h, n);
        if (n == 0) break;
        projection pr;
        project(e, r, h, h + n, 1, &pr);
        int64_t hb = projected_bytes(e, &pr);
        if (hb > e->cap) {
            oversized(e, hb, n, h);
            return;
        }
        int64_t wm = e->nrun > 0 ? cfg->watermark_blocks : 0;
        if (same_step) break;
        if (e->pc && cfg->reserve_full_isl) {
            if (pc_input_need(e, r, h) + wm > pc_free_count(e)) break;
        } else if (cfg->reserve_full_isl) {
            int64_t ibl, iby;
            input_need(e, r, h, &ibl, &iby);
            if (e->block_mode) {
                if (ibl + wm > e->usable - e->used_blocks) break;
            } else if (iby > e->cap - e->used_bytes) {
                break;
            }
        }
        if (!try_allocate(e, r, h, h + n, e->block_mode ? wm : 0, 1, &pr)) break;
        if (halted(e)) return;
        waiting_pop(e);
        e->running[e->nrun++] = idx;
        r->computed = h;
        if (!r->admitted_once) {
            r->admitted_once = 1;
            e->info[idx].hit_tokens = h;
            e->info[idx].first_scheduled_time = e->t_start;
        }
        e->prefill_admitted |= h < len - 1;
        event(e, FPM_EV_ADMITTED, idx);
        schedule(e, idx, n, h);
    }
    if (!e->defer) e->capacity_bound = e->wq_len > 0;
}

/* the step's FPM coordinates and duration; 0 when the latency table lacks a phase */
static int step_duration(engine_t *e) {
    fpm_step_rec *sr = &e->rec;
    int64_t np = e->np, pt = e->pt, pkv = e->pkv, nd = e->nd, dkv = e->dkv;
    double dur = 0.0;
    int32_t extra = 0;
    if (e->cfg.use_fixed_step) {
        dur = e->cfg.fixed_step_seconds;
    } else if (e->nsched > 0) {
        int32_t missing = -1;
        step_time(&e->lc, np, pt, pkv, nd, dkv, &dur, &extra, &missing);
        if (missing >= 0) {
            e->stop = FPM_RERR_NO_PHASE;
            e->err_i[0] = missing;
            return 0;
        }
    }
    sr->num_prefill_requests = np;
    sr->sum_prefill_tokens = pt;
    sr->sum_prefill_kv_tokens = pkv;
    sr->num_decode_requests = nd;
    sr->sum_decode_kv_tokens = dkv;
    sr->duration_s = dur;
    sr->extrapolated = extra;
    sr->t_end = e->t_start + dur;
    return 1;
}

/* advance computed tokens, sample, finish and release */
static void finish_step(engine_t *e) {
    const int64_t L = e->cfg.max_model_len, ns = e->nsched, *sreq = e->sched_req, *sn = e->sched_n, *sc = e->sched_c;
    request_t *req = e->req;
    double t_end = e->rec.t_end;
    int any = 0;
    for (int64_t s = 0; s < ns; s++) {
        request_t *r = &req[sreq[s]];
        int64_t len = req_len(r), n = sn[s];
        r->prefill_chunk = sc[s] + n < len;
        r->computed += n;
        if (r->computed != len) continue;
        int64_t g = ++r->generated;
        if (g == 1) {
            e->info[r - req].first_token_time = t_end;
            e->queued_tokens -= r->prompt_len;
        }
        if (g >= r->output_len || len + 1 >= L) {
            e->info[r - req].finish_time = t_end;
            r->status = FPM_RST_FINISHED;
            release_all(e, r);
            event(e, FPM_EV_FINISHED, r - req);
            e->done_list[e->ndone++] = r - req;
            e->completed++;
            e->unfinished--;
            any = 1;
        }
    }
    if (any) {
        int64_t w = 0;
        for (int64_t q = 0; q < e->nrun; q++)
            if (req[e->running[q]].status != FPM_RST_FINISHED) e->running[w++] = e->running[q];
        e->nrun = w;
    }
}

/* the totals of one completed step */
static void count_step(engine_t *e) {
    fpm_replay_totals *tt = &e->totals;
    const fpm_step_rec *sr = &e->rec;
    if (e->nsteps_total == 0) tt->first_t_start = sr->t_start;
    tt->last_t_end = sr->t_end;
    tt->preemptions += e->step_preempted;
    tt->peak_running = max64(tt->peak_running, e->nrun + e->step_finished);
    tt->peak_used_bytes = max64(tt->peak_used_bytes, sr->used_bytes_scheduled);
    tt->peak_used_blocks = max64(tt->peak_used_blocks, sr->used_blocks_scheduled);
    tt->extrapolated_steps += sr->extrapolated != 0;
    e->nsteps_total++;
}

/* ------------------------------------------------------------ one step */

/* one scheduler call.  Records the step in e->rec (and the scratch
 * lists) unless the replay stops in it. */
static void run_step(engine_t *e) {
    const fpm_replay_config *cfg = &e->cfg;
    e->nev = e->ndone = 0;
    e->step_preempted = e->step_finished = 0;
    memset(&e->rec, 0, sizeof e->rec);
    if (e->mode != FPM_ARRIVE_STEP && e->wq_len == 0 && e->nrun == 0) {
        double at = e->in[e->order[e->pend]].arrival_time;
        if (at > e->t) e->t = at;
    }
    e->t_start = cfg->use_fixed_step ? (double)e->k * cfg->fixed_step_seconds : e->t;
    if (e->nsteps_total >= e->max_steps) {
        e->stop = FPM_RERR_STEP_LIMIT;
        e->err_i[0] = e->max_steps;
        e->err_i[1] = e->k;
        return;
    }
    enqueue_arrivals(e);
    begin_step(e);
    schedule_running(e);
    if (!halted(e) && !e->preempted) schedule_waiting(e);
    if (halted(e)) return;
    e->rec.used_bytes_scheduled = used_bytes(e);
    e->rec.used_blocks_scheduled = used_blocks(e);
    if (e->nsched > 0) e->executed++;
    if (e->interval > 1 && (e->prefill_scheduled || e->prefill_admitted)) e->last_prefill_step = e->executed;
    if (!step_duration(e)) return;
    finish_step(e);
    fpm_step_rec *sr = &e->rec;
    sr->step = e->k;
    sr->t_start = e->t_start;
    sr->sched_len = e->nsched;
    sr->event_len = e->nev;
    sr->running = e->nrun;
    sr->waiting = e->wq_len;
    sr->used_bytes_end = used_bytes(e);
    sr->used_blocks_end = used_blocks(e);
    sr->held_len = e->nrun;
    count_step(e);
    e->k++;
    e->t = sr->t_end;
}

/* ------------------------------------------------------------ output */

static void request_record(const engine_t *e, int64_t idx, fpm_request_rec *o) {
    const request_t *r = &e->req[idx];
    const request_info_t *ri = &e->info[idx];
    if (!r->arrived) { /* never arrived (the replay stopped before): nothing happened to it */
        memset(o, 0, sizeof *o);
        o->arrival_time = o->first_scheduled_time = o->first_token_time = o->finish_time = NAN;
        o->request = idx;
        return;
    }
    o->status = r->status;
    o->reject_reason = ri->reject_reason;
    o->reject_a = ri->reject_a;
    o->reject_b = ri->reject_b;
    o->arrival_time = ri->arrival_time;
    o->first_scheduled_time = ri->first_scheduled_time;
    o->first_token_time = ri->first_token_time;
    o->finish_time = ri->finish_time;
    o->output_tokens = r->generated;
    o->preemptions = ri->preemptions;
    o->prefix_hit_tokens = ri->hit_tokens;
    o->request = idx;
}

/* write the last step's records.  count_only: write what fits and count
 * the rest (fpm_replay_run); else write all of it or nothing (returns 0). */
static int record_step(engine_t *e, fpm_replay_output *out, int count_only, int with_step) {
    int64_t need_held = e->nrun * (1 + e->G);
    int recording = out->steps != NULL || count_only;
    if (!count_only) {
        if (out->done_cap - out->ndone < e->ndone) return 0;
        if (recording && with_step &&
            (out->steps_cap - out->nsteps < 1 || out->sched_cap - out->nsched < e->nsched ||
             out->events_cap - out->nevents < e->nev || out->held_cap - out->nheld < need_held))
            return 0;
        for (int64_t i = 0; i < e->ndone; i++) request_record(e, e->done_list[i], &out->done[out->ndone++]);
    }
    if (!recording || !with_step) return 1;
    fpm_step_rec *sr = &e->rec;
    sr->sched_off = out->nsched;
    sr->event_off = out->nevents;
    sr->held_off = out->nheld;
    for (int64_t s = 0; s < e->nsched; s++, count_add(&out->nsched, 1)) {
        if (out->nsched >= out->sched_cap) continue;
        fpm_sched_rec *x = &out->sched[out->nsched];
        x->req = e->sched_req[s];
        x->tokens = e->sched_n[s];
        x->computed_before = e->sched_c[s];
    }
    for (int64_t i = 0; i < e->nev; i++, count_add(&out->nevents, 1))
        if (out->nevents < out->events_cap) out->events[out->nevents] = e->ev[i];
    for (int64_t q = 0; q < e->nrun; q++, count_add(&out->nheld, 1 + e->G)) {
        if (out->nheld > out->held_cap - (1 + e->G)) continue;
        int64_t *hp = &out->held[out->nheld];
        hp[0] = e->running[q];
        for (int gi = 0; gi < e->G; gi++) hp[1 + gi] = held_count(e, &e->req[e->running[q]], gi);
    }
    if (out->nsteps < out->steps_cap) out->steps[out->nsteps] = *sr;
    count_add(&out->nsteps, 1);
    return 1;
}

static void report(const engine_t *e, fpm_replay_output *out) {
    out->ended = e->ended;
    out->error_code = e->stop;
    memcpy(out->err_i, e->err_i, sizeof out->err_i);
    out->err_d = e->err_d;
    out->totals = e->totals;
    out->steps_total = e->nsteps_total;
    out->completed_total = e->completed;
}

/* One step, or a jump; after it the replay may have ended. */
static void next_step(engine_t *e, fpm_replay_output *out, int records) {
    if (!records && e->mode == FPM_ARRIVE_STEP && e->nrun == 0 && e->wq_len == 0 && e->pend < e->n) {
        int64_t m = min64(e->in[e->order[e->pend]].arrival_step - e->k, e->max_steps - e->nsteps_total);
        if (m > 0) {
            jump_unchanged(e, m, out);
            e->nev = e->ndone = 0;
            return;
        }
    }
    if (!records && jump_decodes(e, out) > 0) {
        e->nev = e->ndone = 0;
        return;
    }
    run_step(e);
    e->pending = 1;
    if (halted(e)) {
        e->ended = 1;
        return;
    }
    int stalled = e->nsched == 0 && !e->preempted && (e->nrun > 0 || e->wq_len > 0);
    if (stalled) {
        if (e->pend >= e->n) {
            e->stop = FPM_RERR_STALL;
            e->err_i[0] = e->k - 1;
            e->err_i[1] = e->nrun;
            e->err_i[2] = e->wq_len;
            e->err_d = e->t_start;
        } else if (e->mode != FPM_ARRIVE_STEP) {
            double at = e->in[e->order[e->pend]].arrival_time;
            if (at > e->t) e->t = at;
        }
    }
    if (halted(e) || (e->pend >= e->n && e->wq_len == 0 && e->nrun == 0)) e->ended = 1;
}

/* ------------------------------------------------------------ advance / run */

static int out_ok(const fpm_replay_output *out) {
    if (out->steps_cap < 0 || out->sched_cap < 0 || out->events_cap < 0 || out->held_cap < 0 || out->done_cap < 0)
        return 0;
    if ((out->steps_cap && !out->steps) || (out->sched_cap && !out->sched) || (out->events_cap && !out->events) ||
        (out->held_cap && !out->held) || (out->done_cap && !out->done))
        return 0;
    return 1;
}

/* Give back the memory of the requests fpm_replay_advance is done with: those before the first request not
 * completed, whose records were written (none is when a step is pending), and the arrival order before
 * the next arrival.  Nothing reads them again: a completed request is in no queue, and fpm_replay_run,
 * which reads every request at its end, does not call this.  A trace in arrival order (as most are) keeps
 * memory for about the requests in flight, not for all of them. */
static void release_completed(engine_t *e) {
    if (e->pending) return;
    while (e->low < e->n && e->req[e->low].status != 0) e->low++;
    e->req_released = fpm_release_front(e->req, (size_t)e->low * sizeof(request_t), e->req_released);
    e->info_released = fpm_release_front(e->info, (size_t)e->low * sizeof(request_info_t), e->info_released);
    e->order_released = fpm_release_front(e->order, (size_t)e->pend * sizeof(int64_t), e->order_released);
}

fpm_status fpm_replay_advance(fpm_replay *e, int64_t max_steps, fpm_replay_output *out) {
    if (e == NULL || out == NULL || max_steps < 1 || !out_ok(out)) return FPM_EINVAL;
    out->nsteps = out->nsched = out->nevents = out->nheld = out->ndone = 0;
    int records = out->steps != NULL;
    int64_t steps = 0;
    for (;;) {
        if (e->pending) {
            int with_step = step_recorded(e);
            if (!record_step(e, out, 0, with_step)) {
                if (out->nsteps == 0 && out->ndone == 0) {
                    /* not even one step fits: say how large it is */
                    out->nsteps = 1;
                    out->nsched = e->nsched;
                    out->nevents = e->nev;
                    out->nheld = e->nrun * (1 + e->G);
                    out->ndone = e->ndone;
                    report(e, out);
                    return FPM_ENOSPC;
                }
                break;
            }
            e->pending = 0;
            steps++;
        }
        if (e->failure != FPM_OK) {
            report(e, out);
            return e->failure;
        }
        if (e->ended || steps >= max_steps) break;
        int64_t before = e->nsteps_total;
        next_step(e, records ? NULL : out, records);
        if (!e->pending) steps += e->nsteps_total - before;
    }
    /* jumped steps are counted, not written */
    if (!records) out->nsteps = out->nsched = out->nheld = 0;
    report(e, out);
    release_completed(e);
    return FPM_OK;
}

fpm_status fpm_replay_run(const fpm_replay_config *cfg, const fpm_replay_request *reqs, int64_t n, int32_t mode,
                          fpm_replay_output *out) {
    if (out == NULL || !out_ok(out) || (n > 0 && out->requests == NULL)) return FPM_EINVAL;
    fpm_replay *e = NULL;
    fpm_status st = fpm_replay_open(cfg, reqs, n, mode, &e);
    if (st != FPM_OK) return st;
    out->nsteps = out->nsched = out->nevents = out->nheld = out->ndone = 0;
    int records = out->steps_cap > 0 || out->sched_cap > 0 || out->events_cap > 0 || out->held_cap > 0;
    while (!e->ended) {
        next_step(e, out, records);
        if (e->pending) {
            int with_step = step_recorded(e);
            record_step(e, out, 1, with_step);
            e->pending = 0;
        }
        if (e->failure != FPM_OK) {
            fpm_status failure = e->failure;
            fpm_replay_close(e);
            return failure;
        }
    }
    for (int64_t i = 0; i < n; i++) request_record(e, i, &out->requests[i]);
    report(e, out);
    fpm_replay_close(e);
    if (out->nsteps > out->steps_cap || out->nsched > out->sched_cap || out->nevents > out->events_cap ||
        out->nheld > out->held_cap)
        return FPM_ENOSPC;
    return FPM_OK;
}
