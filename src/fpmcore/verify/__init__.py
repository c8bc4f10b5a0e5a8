"""``fpm verify``: the predictions of a campaign against its engine, serving the same trace.

::

    fpm verify CAMPAIGN [--trace TRACE | --rate R --requests N --prompt A:B --output A:B --seed S]
        [--runs K] [--warmup-requests N] [--noise-floor] [-o REPORT] [--plot OUT.png] [--json]

``CAMPAIGN`` is a folder of ``fpm onboard`` (:mod:`fpmcore.campaign.onboard`).
Each of the ``K`` runs serves a trace on the live engine of the runtime plugin
selected for the plan's runtime (``fpm_serving_engine``, started with the
plan's deployment like ``fpm collect``'s engine), replays the same trace with
the campaign's profile, the profile runtime's replay rules and the published
table (the C engine), and compares them (:mod:`fpmcore.verify.compare`).
The modules:

* :mod:`fpmcore.verify.traces` — the traces a run serves (a file ``fpm replay``
  reads, or a seeded Poisson trace) and their token ids;
* :mod:`fpmcore.verify.compare` — the errors, the contention of a serving,
  the contention bound of a run and the verdict;
* :mod:`fpmcore.verify.run` — :func:`~fpmcore.verify.run.verify_campaign`,
  the whole verification as one function of a host (``fpm onboard`` may call it);
* :mod:`fpmcore.verify.command` — the command line, the human report and ``-o``;
* :mod:`fpmcore.verify.prediction_plot` — ``--plot``.

**Rules** (the command prints ``fpm: <where>: <message> [V-n]`` and exits 2):

====  =========================================================================
V-1   the runtime plugin of the plan's runtime serves no engine (it does not
      implement ``fpm_serving_engine``); the message names the plugins that
      implement it.
V-2   ``CAMPAIGN`` is not a finished campaign of ``fpm onboard``: a file of
      it is missing or is not what onboard writes (``onboard.json`` naming
      the model folder in ``options.model_dir``, ``profile.json``,
      ``plan.json`` with ``engine.runtime``, ``table.json``).
V-3   the trace cannot be served: it has step-exact arrivals
      (``arrival_step``: a serving runs in wall-clock time), or a request
      needs more than the deployment's ``max_model_len``; the message names
      the request.
V-4   the replay did not finish every request of the trace (it stopped, or
      rejected a request the engine serves); the message gives the replay's
      reason.
V-5   the engine failed while starting or serving; the message names the
      plugin and what it raised.
====  =========================================================================
"""
