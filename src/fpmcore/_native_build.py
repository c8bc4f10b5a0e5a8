"""cffi build script of :mod:`fpmcore._native` (API out-of-line mode).

``setup.py`` names it in ``cffi_modules``.  The C sources live in ``csrc/``;
``FPM_VERSION`` is the package version, so that :mod:`fpmcore.native` can
refuse a stale build.
"""

from __future__ import annotations

import re
from pathlib import Path

from cffi import FFI

ROOT = Path(__file__).resolve().parents[2]
CSRC = ROOT / "csrc"
VERSION = re.search(
    r'^__version__ = "([^"]+)"', (ROOT / "src" / "fpmcore" / "__init__.py").read_text(), re.M
).group(1)

# The declarations cffi exposes: the public API of csrc/fpmcore.h and
# csrc/fpm_replay.h without preprocessor lines.
CDEF = """
typedef int32_t fpm_status;
fpm_status fpm_version(const char **out);

typedef struct {
    int32_t kind;
    int64_t block;
    int64_t page;
    int64_t window;
    int64_t blocks_per_request;
    int64_t checkpoint_blocks;
    int64_t checkpoint_alignment;
} fpm_group;
typedef struct { int64_t batch_size, total_prefill_tokens, total_kv_read_tokens; double wall_time; } fpm_prefill_row;
typedef struct { int64_t batch_size, total_kv_read_tokens; double wall_time; } fpm_decode_row;
typedef struct {
    const fpm_group *groups;
    int32_t ngroups;
    int64_t capacity_bytes;
    int64_t max_num_batched_tokens;
    int64_t max_num_seqs;
    int64_t max_model_len;
    int32_t enable_chunked_prefill;
    int32_t reserve_full_isl;
    int32_t prefix_caching;
    int64_t watermark_blocks;
    int64_t hash_block_size;
    int32_t use_fixed_step;
    double fixed_step_seconds;
    const fpm_prefill_row *prefill;
    int64_t nprefill;
    const fpm_decode_row *decode;
    int64_t ndecode;
    const int64_t *origin_upto;
    const int64_t *origin_key;
    int64_t norigin;
} fpm_replay_config;
typedef struct {
    int64_t prompt_len;
    int64_t output_len;
    int64_t arrival_step;
    double arrival_time;
    int64_t own_key;
    int64_t origin_off;
    int64_t origin_len;
} fpm_replay_request;
typedef struct {
    int64_t step;
    double t_start, t_end, duration_s;
    int32_t extrapolated;
    int64_t sched_off, sched_len;
    int64_t event_off, event_len;
    int64_t held_off, held_len;
    int64_t num_prefill_requests, sum_prefill_tokens, sum_prefill_kv_tokens;
    int64_t num_decode_requests, sum_decode_kv_tokens;
    int64_t running, waiting;
    int64_t used_bytes_scheduled, used_bytes_end, used_blocks_scheduled, used_blocks_end;
} fpm_step_rec;
typedef struct { int64_t req, tokens, computed_before; } fpm_sched_rec;
typedef struct { int32_t kind; int64_t req; } fpm_event_rec;
typedef struct {
    int32_t status;
    int32_t reject_reason;
    int64_t reject_a, reject_b;
    double arrival_time, first_scheduled_time, first_token_time, finish_time;
    int64_t output_tokens, preemptions, prefix_hit_tokens;
} fpm_request_rec;
typedef struct {
    double first_t_start, last_t_end;
    int64_t preemptions;
    int64_t peak_running;
    int64_t peak_used_bytes;
    int64_t peak_used_blocks;
    int64_t extrapolated_steps;
} fpm_replay_totals;
typedef struct {
    fpm_step_rec *steps;
    int64_t steps_cap, nsteps;
    fpm_sched_rec *sched;
    int64_t sched_cap, nsched;
    fpm_event_rec *events;
    int64_t events_cap, nevents;
    int64_t *held;
    int64_t held_cap, nheld;
    fpm_request_rec *requests;
    int32_t error_code;
    int64_t err_i[5];
    double err_d;
    fpm_replay_totals totals;
} fpm_replay_output;
fpm_status fpm_replay_run(const fpm_replay_config *cfg, const fpm_replay_request *reqs, int64_t nreqs,
                          int32_t arrival_mode, fpm_replay_output *out);
typedef struct {
    int64_t start, num_new_tokens, prompt_len, num_tokens, block_size, hash_block_size;
    int64_t max_num_batched_tokens, checkpoint_alignment, junction;
    int32_t junction_checkpoint;
} fpm_align_query;
fpm_status fpm_align_stop(const fpm_align_query *q, int64_t *out);
fpm_status fpm_block_range(const fpm_group *g, int64_t computed, int64_t target, int64_t *first, int64_t *end);
fpm_status fpm_peak_request_blocks(const fpm_group *g, int64_t context, int64_t max_num_tokens, int64_t *out);
fpm_status fpm_step_time(const fpm_replay_config *cfg, int64_t nprefill, int64_t prefill_tokens,
                         int64_t prefill_kv, int64_t ndecode, int64_t decode_kv, double *seconds,
                         int32_t *extrapolated, int32_t *missing_phase);
"""

ffibuilder = FFI()
ffibuilder.cdef(CDEF)
ffibuilder.set_source(
    "fpmcore._native",
    '#include "fpmcore.h"',
    sources=sorted(str(p.relative_to(ROOT)) for p in CSRC.glob("*.c")),
    include_dirs=[str(CSRC.relative_to(ROOT))],
    define_macros=[("FPM_VERSION", f'"{VERSION}"')],
    depends=sorted(str(p.relative_to(ROOT)) for p in CSRC.glob("*.h")),
    # No fused multiply-add: the latency model must round exactly as the Python reference.
    extra_compile_args=["-std=c11", "-O2", "-Wall", "-Wextra", "-ffp-contract=off"],
)

if __name__ == "__main__":  # pragma: no cover
    ffibuilder.compile(verbose=True)
