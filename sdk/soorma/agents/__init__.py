"""Agent types: :class:`~soorma.Agent` (raw events), :class:`~soorma.Tool`
(request/response), :class:`~soorma.Worker` (async tasks with delegation) and
:class:`~soorma.Planner` (state machines). Import them from :mod:`soorma`; this package
holds their implementation and exports nothing of its own."""

__all__: list[str] = []
