/* The replay's waiting queue (spec 06 ): FCFS, a ring buffer with
 * preempted requests to the front; priority, a binary heap on (priority,
 * arrival order), as vLLM's PriorityRequestQueue.  The queue of
 * src/fpmcore/replay/reference.py. */
#include "fpm_internal.h"

static int wait_less(const engine_t *e, int64_t a, int64_t b) {
    const fpm_replay_request *x = &e->in[a], *y = &e->in[b];
    if (x->priority != y->priority) return x->priority < y->priority;
    return e->info[a].arrival_seq < e->info[b].arrival_seq;
}

static void heap_push(engine_t *e, int64_t idx) {
    int64_t i = e->wq_len++;
    e->wq[i] = idx;
    while (i > 0) {
        int64_t p = (i - 1) / 2;
        if (!wait_less(e, e->wq[i], e->wq[p])) break;
        int64_t t = e->wq[i];
        e->wq[i] = e->wq[p];
        e->wq[p] = t;
        i = p;
    }
}

static void heap_pop(engine_t *e) {
    e->wq[0] = e->wq[--e->wq_len];
    int64_t i = 0;
    for (;;) {
        int64_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < e->wq_len && wait_less(e, e->wq[l], e->wq[m])) m = l;
        if (r < e->wq_len && wait_less(e, e->wq[r], e->wq[m])) m = r;
        if (m == i) break;
        int64_t t = e->wq[i];
        e->wq[i] = e->wq[m];
        e->wq[m] = t;
        i = m;
    }
}

void waiting_push_back(engine_t *e, int64_t idx) {
    if (e->cfg.policy == FPM_POLICY_PRIORITY) {
        heap_push(e, idx);
        return;
    }
    e->wq[(e->wq_head + e->wq_len) % e->n] = idx;
    e->wq_len++;
}

void waiting_push_front(engine_t *e, int64_t idx) {
    if (e->cfg.policy == FPM_POLICY_PRIORITY) {
        heap_push(e, idx);
        return;
    }
    e->wq_head = (e->wq_head + e->n - 1) % e->n;
    e->wq[e->wq_head] = idx;
    e->wq_len++;
}

int64_t waiting_head(const engine_t *e) { return e->cfg.policy == FPM_POLICY_PRIORITY ? e->wq[0] : e->wq[e->wq_head]; }

void waiting_pop(engine_t *e) {
    if (e->cfg.policy == FPM_POLICY_PRIORITY) {
        heap_pop(e);
        return;
    }
    e->wq_head = (e->wq_head + 1) % e->n;
    e->wq_len--;
}
