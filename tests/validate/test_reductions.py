"""The reductions of a point's raw samples: the format's upper median and the trimmed mean ``fpm collect``
retains, and which samples the mean of a re-measured point leaves out."""

from __future__ import annotations

import math

import pytest

from fpmcore.validate.measured_values import TRIMMED_MEAN, UPPER_MEDIAN, reduce_samples, trimmed_mean, upper_median
from fpmcore.validate.repetition_evidence import pass_share, reduced_indices

#: Ten decode samples (ms) of one point of the tiny hybrid on a 2-vCPU EPYC guest, one per pass: two clusters
#: about 1.5 times apart.
DECODE_MS = [7.19, 4.88, 4.88, 7.16, 7.42, 7.34, 6.05, 5.52, 5.25, 6.60]


def test_the_mean_is_the_time_average_the_median_takes_a_cluster():
    kept = DECODE_MS[1:]  # every sample but the first
    assert upper_median(kept) == 6.05
    assert trimmed_mean(kept) == pytest.approx(sum(kept) / 9)  # nine samples: none trimmed
    assert reduce_samples(TRIMMED_MEAN, kept) == trimmed_mean(kept)
    assert reduce_samples(UPPER_MEDIAN, kept) == 6.05


def test_the_trim_leaves_out_a_tenth_at_each_end():
    values = [1.0] * 9 + [1.0, 100.0]  # one outlier among eleven: 11 // 10 = 1 trimmed at each end
    assert trimmed_mean(values) == 1.0
    values = [2.0, 1.0, 3.0] * 7  # 21 values: two trimmed at each end
    assert trimmed_mean(values) == math.fsum(sorted(values)[2:-2]) / 17


def test_a_point_not_remeasured_reduces_every_sample_but_the_first():
    assert reduced_indices([1.0] * 6, 6, 3, TRIMMED_MEAN) == [1, 2, 3, 4, 5]
    assert reduced_indices([1.0] * 8, 6, 3, UPPER_MEDIAN) == list(range(1, 8))


def test_the_mean_of_a_remeasured_point_leaves_out_its_burst_pass():
    # three passes of two samples, pass 1 moved by a burst, then the re-measuring visit's two samples
    walls = [1.0, 1.01, 1.75, 1.76, 0.99, 1.0, 1.02, 1.0]
    assert pass_share(6, 3, 3) == 2
    got = reduced_indices(walls, 6, 3, TRIMMED_MEAN)
    assert got == [1, 4, 5, 6, 7]
    assert trimmed_mean([walls[i] for i in got]) == pytest.approx(1.004)
