/* Step and request records as JSON lines (fpm_records.h), the bytes orjson
 * writes for the record objects of fpmcore.replay.records. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fpmcore.h"

/* Room one number may take: an int64 is at most 20 bytes, a double 24. */
#define NUM_ROOM 24
/* Room of a step record beside its lists: the keys (about 520 bytes) and 16 numbers. */
#define STEP_FIXED_ROOM 1024
/* Room of a request record beside its id and its reason: the keys (about 300 bytes) and 13 numbers. */
#define REQUEST_FIXED_ROOM 640

static char *put(char *w, const char *s, size_t n) {
    memcpy(w, s, n);
    return w + n;
}

#define PUT_LIT(w, lit) put((w), (lit), sizeof(lit) - 1)

/* "00" "01" ... "99": two digits per division. */
static const char TWO_DIGITS[] =
    "00010203040506070809101112131415161718192021222324252627282930313233343536373839404142434445464748495051525354"
    "555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899";

static char *put_int(char *w, int64_t v) {
    uint64_t u = (uint64_t)v;
    if (v < 0) {
        *w++ = '-';
        u = (uint64_t)0 - u;
    }
    if (u < 10) {
        *w++ = (char)('0' + u);
        return w;
    }
    if (u < 100) return put(w, TWO_DIGITS + 2 * u, 2);
    char tmp[24];
    char *p = tmp + sizeof tmp;
    while (u >= 100) {
        p -= 2;
        memcpy(p, TWO_DIGITS + 2 * (u % 100), 2);
        u /= 100;
    }
    if (u >= 10) {
        p -= 2;
        memcpy(p, TWO_DIGITS + 2 * u, 2);
    } else {
        *--p = (char)('0' + u);
    }
    return put(w, p, (size_t)(tmp + sizeof tmp - p));
}

/* Does the decimal m x 10^e read back as exactly v? (digits only: no locale's decimal point) */
static int reads_back(uint64_t m, int e, double v) {
    char s[48];
    snprintf(s, sizeof s, "%llue%d", (unsigned long long)m, e);
    return strtod(s, NULL) == v;
}

/* v rounded to p significant digits by printf: m x 10^e, m of p digits. */
static uint64_t printed(double v, int p, int *e) {
    char s[40];
    snprintf(s, sizeof s, "%.*e", p - 1, v);
    uint64_t m = 0;
    const char *c = s;
    for (; *c != 'e' && *c != '\0'; c++)
        if (*c >= '0' && *c <= '9') m = m * 10 + (uint64_t)(*c - '0');
    *e = (*c == 'e' ? atoi(c + 1) : 0) - (p - 1);
    return m;
}

/* v rounded to p < 17 digits, from its 17 digits m17 x 10^e17 when they decide it (the dropped digits are not
 * exactly half), else by printf. */
static uint64_t rounded(double v, int p, uint64_t m17, int e17, int *e) {
    uint64_t div = 1;
    for (int i = p; i < 17; i++) div *= 10;
    uint64_t r = m17 % div, m = m17 / div;
    if (r == div / 2) return printed(v, p, e);
    *e = e17 + (17 - p);
    return r > div / 2 ? m + 1 : m;
}

__extension__ typedef unsigned __int128 u128;

/* Is the decimal c x 10^-k (c scaled as N below) within v's rounding interval?  v x 10^k = N / 2^s exactly;
 * half a unit in the last place of v is 5^k / 2^(s+1) in the same scale, the bound included when v's
 * significand is even (ties round to even). */
static int within(u128 c, u128 n, int s, u128 five_k, int even) {
    u128 a = c << (s + 1), b = n << 1;
    u128 d = a > b ? a - b : b - a;
    return d < five_k || (even && d == five_k);
}

/* The shortest digits of a normal v (not a power of two) in [1e-11, 2^53) by exact integer arithmetic: v is
 * f x 2^q, and v x 10^k = f x 5^k / 2^s with k = 16 - floor(log10 v) and s = -(k + q) in 1 .. 64, so that f x 5^k
 * fits 117 bits.  Returns 0 (the caller takes printf's digits) outside that range. */
static int shortest_exact(double v, uint64_t *mant, int *exp10) {
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    int be = (int)((bits >> 52) & 0x7ff);
    uint64_t f = bits & ((1ULL << 52) - 1);
    if (be == 0 || f == 0 || v < 1e-11 || v >= 9007199254740992.0) return 0;
    f |= 1ULL << 52;
    int q = be - 1075;
    int k = 16 - (int)floor(log10(v));
    int s = -(k + q);
    if (k < 0 || k > 27 || s < 1 || s > 64) return 0;
    u128 five_k = 1;
    for (int i = 0; i < k; i++) five_k *= 5;
    u128 n = (u128)f * five_k;
    static const uint64_t P10[] = {1, 10, 100};
    for (int p = 15; p <= 17; p++) {
        u128 unit = (u128)P10[17 - p] << s; /* one in the last of p digits */
        u128 m = n / unit, r = n % unit;
        if (2 * r > unit || (2 * r == unit && (m & 1))) m++;
        if (p == 17 && (m < 10000000000000000ULL || m >= 100000000000000000ULL)) return 0; /* log10 was off */
        int found = within(m * P10[17 - p], n, s, five_k, !(f & 1));
        if (!found && p == 16) {
            if (within((m + 1) * P10[1], n, s, five_k, !(f & 1))) {
                m++;
                found = 1;
            } else if (m > 0 && within((m - 1) * P10[1], n, s, five_k, !(f & 1))) {
                m--;
                found = 1;
            }
        }
        if (!found && p == 17) return 0;
        if (found) {
            int e = (17 - p) - k;
            uint64_t mm = (uint64_t)m;
            while (mm != 0 && mm % 10 == 0) {
                mm /= 10;
                e++;
            }
            *mant = mm;
            *exp10 = e;
            return 1;
        }
    }
    return 0;
}

/* The shortest decimal m x 10^e (m without trailing zeros) that reads back as v (finite, > 0); of two that
 * short, the closer.  A double has one decimal of at most 15 significant digits that reads back when it has
 * any (DBL_DIG), and then v rounded to 15 digits is it; of 16 digits it may have two, the correctly rounded
 * one or, next to a power of two, its neighbour on the wider side; 17 digits always read back.  A subnormal
 * has fewer digits of its own: every length is tried, from one. */
static void shortest(double v, uint64_t *mant, int *exp10) {
    int subnormal = v < DBL_MIN;
    int e17;
    uint64_t m17 = printed(v, 17, &e17);
    for (int p = subnormal ? 1 : 15; p <= 17; p++) {
        int e = e17;
        uint64_t m = p == 17 ? m17 : subnormal ? printed(v, p, &e) : rounded(v, p, m17, e17, &e);
        int found = p == 17 || reads_back(m, e, v);
        if (!found && (p == 16 || subnormal)) {
            uint64_t lo = 1, hi = 10;
            for (int i = 1; i < p; i++) lo *= 10, hi *= 10;
            if (m + 1 < hi && reads_back(m + 1, e, v)) {
                m += 1;
                found = 1;
            } else if (m - 1 >= lo && reads_back(m - 1, e, v)) {
                m -= 1;
                found = 1;
            }
        }
        if (found) {
            while (m != 0 && m % 10 == 0) {
                m /= 10;
                e++;
            }
            *mant = m;
            *exp10 = e;
            return;
        }
    }
}

/* v as orjson writes a float: the shortest digits laid out as Ryu's pretty form (with "e+" before a
 * positive exponent); NaN and the infinities as null. */
static char *put_double(char *w, double v) {
    if (isnan(v) || isinf(v)) return PUT_LIT(w, "null");
    if (signbit(v)) {
        *w++ = '-';
        v = -v;
    }
    if (v < 1e16 && v == (double)(int64_t)v) { /* whole numbers below 10^16: the integer and ".0" */
        w = put_int(w, (int64_t)v);
        return PUT_LIT(w, ".0");
    }
    uint64_t m;
    int e;
    if (!shortest_exact(v, &m, &e)) shortest(v, &m, &e);
    char d[24];
    int n = 0;
    char tmp[24];
    do {
        tmp[n++] = (char)('0' + m % 10);
        m /= 10;
    } while (m != 0);
    for (int i = 0; i < n; i++) d[i] = tmp[n - 1 - i];
    int kk = n + e; /* v = 0.d x 10^kk */
    if (e >= 0 && kk <= 16) {
        w = put(w, d, (size_t)n);
        for (int i = 0; i < e; i++) *w++ = '0';
        return PUT_LIT(w, ".0");
    }
    if (kk > 0 && kk <= 16) {
        w = put(w, d, (size_t)kk);
        *w++ = '.';
        return put(w, d + kk, (size_t)(n - kk));
    }
    if (kk > -5 && kk <= 0) {
        w = PUT_LIT(w, "0.");
        for (int i = 0; i < -kk; i++) *w++ = '0';
        return put(w, d, (size_t)n);
    }
    *w++ = d[0];
    if (n > 1) {
        *w++ = '.';
        w = put(w, d + 1, (size_t)(n - 1));
    }
    *w++ = 'e';
    if (kk - 1 > 0) *w++ = '+';
    return put_int(w, kk - 1);
}

static char *put_text(char *w, const fpm_text_list *t, int64_t i) {
    *w++ = '"';
    w = put(w, t->text + t->off[i], (size_t)(t->off[i + 1] - t->off[i]));
    *w++ = '"';
    return w;
}

static char *put_events(char *w, const fpm_event_rec *ev, int64_t n, int32_t kind, const fpm_text_list *ids) {
    *w++ = '[';
    int any = 0;
    for (int64_t j = 0; j < n; j++) {
        if (ev[j].kind != kind) continue;
        if (any) *w++ = ',';
        any = 1;
        w = put_text(w, ids, ev[j].req);
    }
    *w++ = ']';
    return w;
}

static int in_list(int64_t i, const fpm_text_list *t) { return i >= 0 && i < t->n; }

/* The room step s may take, or -1 when it points outside its buffers or names a request outside ids. */
static int64_t step_room(const fpm_replay_output *out, const fpm_step_rec *s, const fpm_step_shape *shape,
                         const fpm_text_list *ids) {
    int64_t w = 1 + (int64_t)shape->ngroups;
    if (s->sched_off < 0 || s->sched_len < 0 || s->sched_len > out->nsched - s->sched_off) return -1;
    if (s->event_off < 0 || s->event_len < 0 || s->event_len > out->nevents - s->event_off) return -1;
    if (s->held_off < 0 || s->held_len < 0 || s->held_len > (out->nheld - s->held_off) / w) return -1;
    for (int64_t j = 0; j < s->sched_len; j++)
        if (!in_list(out->sched[s->sched_off + j].req, ids)) return -1;
    for (int64_t j = 0; j < s->event_len; j++) {
        const fpm_event_rec *e = &out->events[s->event_off + j];
        if (!in_list(e->req, ids) || e->kind < FPM_EV_ADMITTED || e->kind > FPM_EV_REJECTED) return -1;
    }
    if (shape->block_mode)
        for (int64_t j = 0; j < s->held_len; j++)
            if (!in_list(out->held[s->held_off + j * w], ids)) return -1;
    int64_t id = ids->longest + 3;
    return STEP_FIXED_ROOM + s->sched_len * (id + 2 * NUM_ROOM + 6) + s->event_len * id +
           (shape->block_mode ? s->held_len * (id + 4 + (int64_t)shape->ngroups * (NUM_ROOM + 1)) : 0);
}

static char *put_step(char *w, const fpm_replay_output *out, const fpm_step_rec *s, const fpm_step_shape *shape,
                      const fpm_text_list *ids) {
    w = PUT_LIT(w, "{\"step\":");
    w = put_int(w, s->step);
    w = PUT_LIT(w, ",\"t_start\":");
    w = put_double(w, s->t_start);
    w = PUT_LIT(w, ",\"t_end\":");
    w = put_double(w, s->t_end);
    w = PUT_LIT(w, ",\"duration_s\":");
    w = put_double(w, s->duration_s);
    w = s->extrapolated ? PUT_LIT(w, ",\"extrapolated\":true") : PUT_LIT(w, ",\"extrapolated\":false");
    w = PUT_LIT(w, ",\"scheduled\":[");
    for (int64_t j = 0; j < s->sched_len; j++) {
        const fpm_sched_rec *r = &out->sched[s->sched_off + j];
        if (j) *w++ = ',';
        *w++ = '[';
        w = put_text(w, ids, r->req);
        *w++ = ',';
        w = put_int(w, r->tokens);
        *w++ = ',';
        w = put_int(w, r->computed_before);
        *w++ = ']';
    }
    w = PUT_LIT(w, "],\"num_prefill_requests\":");
    w = put_int(w, s->num_prefill_requests);
    w = PUT_LIT(w, ",\"sum_prefill_tokens\":");
    w = put_int(w, s->sum_prefill_tokens);
    w = PUT_LIT(w, ",\"sum_prefill_kv_tokens\":");
    w = put_int(w, s->sum_prefill_kv_tokens);
    w = PUT_LIT(w, ",\"num_decode_requests\":");
    w = put_int(w, s->num_decode_requests);
    w = PUT_LIT(w, ",\"sum_decode_kv_tokens\":");
    w = put_int(w, s->sum_decode_kv_tokens);
    const fpm_event_rec *ev = out->events + s->event_off;
    w = PUT_LIT(w, ",\"admitted\":");
    w = put_events(w, ev, s->event_len, FPM_EV_ADMITTED, ids);
    w = PUT_LIT(w, ",\"preempted\":");
    w = put_events(w, ev, s->event_len, FPM_EV_PREEMPTED, ids);
    w = PUT_LIT(w, ",\"finished\":");
    w = put_events(w, ev, s->event_len, FPM_EV_FINISHED, ids);
    w = PUT_LIT(w, ",\"rejected\":");
    w = put_events(w, ev, s->event_len, FPM_EV_REJECTED, ids);
    w = PUT_LIT(w, ",\"running\":");
    w = put_int(w, s->running);
    w = PUT_LIT(w, ",\"waiting\":");
    w = put_int(w, s->waiting);
    w = PUT_LIT(w, ",\"used_bytes_scheduled\":");
    w = put_int(w, s->used_bytes_scheduled);
    w = PUT_LIT(w, ",\"used_bytes_end\":");
    w = put_int(w, s->used_bytes_end);
    if (!shape->block_mode)
        return PUT_LIT(w, ",\"used_blocks_scheduled\":null,\"used_blocks_end\":null,\"free_blocks\":null,"
                          "\"held_blocks_end\":null}\n");
    w = PUT_LIT(w, ",\"used_blocks_scheduled\":");
    w = put_int(w, s->used_blocks_scheduled);
    w = PUT_LIT(w, ",\"used_blocks_end\":");
    w = put_int(w, s->used_blocks_end);
    w = PUT_LIT(w, ",\"free_blocks\":");
    w = put_int(w, shape->usable_blocks - s->used_blocks_end);
    w = PUT_LIT(w, ",\"held_blocks_end\":{");
    int64_t stride = 1 + (int64_t)shape->ngroups;
    for (int64_t j = 0; j < s->held_len; j++) {
        const int64_t *h = out->held + s->held_off + j * stride;
        if (j) *w++ = ',';
        w = put_text(w, ids, h[0]);
        w = PUT_LIT(w, ":[");
        for (int32_t g = 0; g < shape->ngroups; g++) {
            if (g) *w++ = ',';
            w = put_int(w, h[1 + g]);
        }
        *w++ = ']';
    }
    return PUT_LIT(w, "}}\n");
}

static int text_list_ok(const fpm_text_list *t) {
    return t != NULL && t->n >= 0 && t->longest >= 0 && (t->n == 0 || (t->text != NULL && t->off != NULL));
}

fpm_status fpm_format_steps(const fpm_replay_output *out, int64_t first, const fpm_step_shape *shape,
                            const fpm_text_list *ids, char *buf, int64_t cap, int64_t *len, int64_t *next,
                            int64_t *need) {
    if (out == NULL || shape == NULL || len == NULL || next == NULL || need == NULL || !text_list_ok(ids))
        return FPM_EINVAL;
    if (shape->ngroups < 1 || first < 0 || first > out->nsteps || cap < 0 || (cap > 0 && buf == NULL))
        return FPM_EINVAL;
    if (out->nsteps > 0 && out->steps == NULL) return FPM_EINVAL;
    char *w = buf;
    *len = 0;
    *next = first;
    *need = 0;
    for (int64_t i = first; i < out->nsteps; i++) {
        const fpm_step_rec *s = &out->steps[i];
        int64_t room = step_room(out, s, shape, ids);
        if (room < 0) return FPM_EINVAL;
        if (room > cap - (w - buf)) {
            *need = room;
            return FPM_ENOSPC;
        }
        w = put_step(w, out, s, shape, ids);
        *len = w - buf;
        *next = i + 1;
    }
    return FPM_OK;
}

static char *put_request(char *w, const fpm_request_rec *r, const fpm_trace_fields *tr, const fpm_text_list *reasons,
                         int64_t k, double *ttft, double *tpot, double *e2e, fpm_request_sums *sums) {
    int64_t i = r->request;
    double arr = isnan(tr->arrival_time[i]) ? r->arrival_time : tr->arrival_time[i];
    int finished = r->status == FPM_RST_FINISHED;
    w = PUT_LIT(w, "{\"request_id\":");
    w = put_text(w, tr->ids, i);
    w = PUT_LIT(w, ",\"arrival_time\":");
    w = put_double(w, arr);
    w = PUT_LIT(w, ",\"prompt_len\":");
    w = put_int(w, tr->prompt_len[i]);
    w = PUT_LIT(w, ",\"output_len\":");
    w = put_int(w, tr->output_len[i]);
    if (finished) {
        w = PUT_LIT(w, ",\"status\":\"finished\",\"reject_reason\":null");
    } else {
        w = PUT_LIT(w, ",\"status\":\"rejected\",\"reject_reason\":");
        if (reasons != NULL && reasons->off[k + 1] > reasons->off[k])
            w = put(w, reasons->text + reasons->off[k], (size_t)(reasons->off[k + 1] - reasons->off[k]));
        else
            w = PUT_LIT(w, "null");
    }
    w = PUT_LIT(w, ",\"first_scheduled_time\":");
    w = put_double(w, r->first_scheduled_time);
    w = PUT_LIT(w, ",\"first_token_time\":");
    w = put_double(w, r->first_token_time);
    w = PUT_LIT(w, ",\"finish_time\":");
    w = put_double(w, r->finish_time);
    w = PUT_LIT(w, ",\"output_tokens\":");
    w = put_int(w, r->output_tokens);
    w = PUT_LIT(w, ",\"preemptions\":");
    w = put_int(w, r->preemptions);
    w = PUT_LIT(w, ",\"prefix_hit_tokens\":");
    w = put_int(w, r->prefix_hit_tokens);
    sums->output_tokens += r->output_tokens;
    sums->prefix_hit_tokens += r->prefix_hit_tokens;
    if (!finished) {
        sums->rejected++;
        return PUT_LIT(w, ",\"ttft_s\":null,\"tpot_s\":null,\"e2e_s\":null}\n");
    }
    sums->finished++;
    double ft = r->first_token_time, fin = r->finish_time;
    double t = ft - arr, e = fin - arr;
    ttft[sums->nttft++] = t;
    e2e[sums->ne2e++] = e;
    w = PUT_LIT(w, ",\"ttft_s\":");
    w = put_double(w, t);
    w = PUT_LIT(w, ",\"tpot_s\":");
    if (r->output_tokens > 1) {
        double p = (fin - ft) / (double)(r->output_tokens - 1);
        tpot[sums->ntpot++] = p;
        w = put_double(w, p);
    } else {
        w = PUT_LIT(w, "null");
    }
    w = PUT_LIT(w, ",\"e2e_s\":");
    w = put_double(w, e);
    return PUT_LIT(w, "}\n");
}

fpm_status fpm_format_requests(const fpm_request_rec *done, int64_t ndone, const fpm_trace_fields *trace,
                               const fpm_text_list *reasons, char *buf, int64_t cap, int64_t *len, int64_t *need,
                               double *ttft, double *tpot, double *e2e, fpm_request_sums *sums) {
    if (ndone < 0 || (ndone > 0 && (done == NULL || ttft == NULL || tpot == NULL || e2e == NULL)))
        return FPM_EINVAL;
    if (trace == NULL || !text_list_ok(trace->ids) || len == NULL || need == NULL || sums == NULL) return FPM_EINVAL;
    if (trace->ids->n > 0 && (trace->prompt_len == NULL || trace->output_len == NULL || trace->arrival_time == NULL))
        return FPM_EINVAL;
    if (reasons != NULL && (!text_list_ok(reasons) || reasons->n != ndone)) return FPM_EINVAL;
    if (cap < 0 || (cap > 0 && buf == NULL)) return FPM_EINVAL;
    int64_t room = 0;
    for (int64_t k = 0; k < ndone; k++) {
        const fpm_request_rec *r = &done[k];
        if (!in_list(r->request, trace->ids)) return FPM_EINVAL;
        if (r->status != FPM_RST_FINISHED && r->status != FPM_RST_REJECTED) return FPM_EINVAL;
        room += REQUEST_FIXED_ROOM + trace->ids->longest;
        if (reasons != NULL) {
            if (reasons->off[k] < 0 || reasons->off[k + 1] < reasons->off[k]) return FPM_EINVAL;
            room += reasons->off[k + 1] - reasons->off[k];
        }
    }
    *len = 0;
    *need = room;
    if (room > cap) return FPM_ENOSPC;
    char *w = buf;
    for (int64_t k = 0; k < ndone; k++) w = put_request(w, &done[k], trace, reasons, k, ttft, tpot, e2e, sums);
    *len = w - buf;
    return FPM_OK;
}

fpm_status fpm_format_double(double value, char *buf, int64_t *len) {
    if (buf == NULL || len == NULL) return FPM_EINVAL;
    *len = put_double(buf, value) - buf;
    return FPM_OK;
}

static int double_cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

fpm_status fpm_sort_doubles(double *v, int64_t n) {
    if (n < 0 || (v == NULL && n != 0)) return FPM_EINVAL;
    for (int64_t i = 0; i < n; i++)
        if (isnan(v[i])) return FPM_EINVAL;
    if (n > 1) qsort(v, (size_t)n, sizeof *v, double_cmp);
    return FPM_OK;
}
