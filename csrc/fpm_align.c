/* vLLM's Mamba align split (04 G-2 ... G-6), with prefix caching.  Mirrors
 * src/fpmcore/replay/align.py. */
#include "fpm_internal.h"

int checkpoint_valid(int64_t start, int64_t end, int64_t ckpt, int64_t hash_block, int64_t block, int64_t align) {
    if (align <= 0) return 0;
    return start % hash_block == 0 && cdiv64(end, block) - 2 > floordiv64(start - 1, block) &&
           start + hash_block <= ckpt && start < ckpt && ckpt < end && (ckpt - start) % align == 0;
}

/* 04 G-2 ... G-6: the tokens of a proposed chunk that vLLM schedules. */
int64_t align_stop(const fpm_align_query *q) {
    int64_t start = q->start, k = q->num_new_tokens, b = q->block_size;
    int64_t prefill_end = max64(q->prompt_len, q->num_tokens - 1);
    if (start >= prefill_end) return k;
    int64_t last_cache = q->last_stop_at_tokens ? floordiv64(q->num_tokens, b) * b : align_pos(q->num_tokens, b);
    int64_t end = start + k;
    int64_t ckpt_pos = align_pos(prefill_end, b);
    int internal = q->checkpoint_alignment > 0 && end >= prefill_end &&
                   checkpoint_valid(start, end, ckpt_pos, q->hash_block_size, b, q->checkpoint_alignment);
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
    return max64(end - start, 0);
}

fpm_status fpm_align_stop(const fpm_align_query *q, int64_t *out) {
    if (q == NULL || out == NULL) return FPM_EINVAL;
    if (q->block_size <= 0 || q->hash_block_size <= 0 || q->num_new_tokens < 0 || q->start < 0 ||
        q->checkpoint_alignment < 0 || q->max_num_batched_tokens < 0 || q->junction < 0 || q->prompt_len < 0 ||
        q->num_tokens < 0)
        return FPM_EINVAL;
    if (q->block_size > FPM_MAX_TOKENS || q->hash_block_size > FPM_MAX_TOKENS || q->start > FPM_MAX_TOKENS ||
        q->num_new_tokens > FPM_MAX_TOKENS || q->prompt_len > FPM_MAX_TOKENS || q->num_tokens > FPM_MAX_TOKENS ||
        q->checkpoint_alignment > FPM_MAX_TOKENS || q->junction > FPM_MAX_TOKENS)
        return FPM_EINVAL;
    *out = align_stop(q);
    return FPM_OK;
}
