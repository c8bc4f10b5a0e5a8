"""A campaign: ``fpm onboard`` runs probe, import, plan, smoke, readiness, collect, validate, assess, publish
and verify into one folder (:mod:`fpmcore.campaign.onboard`, :mod:`fpmcore.campaign.readiness`), whose layout
and digests :mod:`fpmcore.campaign.layout` names, and ``fpm finalize`` accepts it (F-1 … F-8,
:mod:`fpmcore.campaign.finalize`).  Both commands are :mod:`fpmcore.campaign.command`."""
