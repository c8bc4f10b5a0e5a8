"""``fpm plan``: the benchmark points of a model from an accepted profile — the plan document and its
limits (:mod:`fpmcore.plan.planning`), the model-agnostic point grid (:mod:`fpmcore.plan.point_grid`); the
command is :mod:`fpmcore.plan.command`."""
