"""The mock's HTTP face: the Messages API app, its transport and gate, the server and its CLI.

``transport`` (uvicorn's httptools protocol with bounds, the connection cap, delivery
checks), ``gate`` (who may be answered at all, on every route), ``playing`` (a scripted body
played from its plan, how it ended journaled once), ``threads`` (message threads: the
conversation the API keeps for a client), ``admin`` (the mock's own routes under
``/_mock/``), ``unscripted`` (the routes no rule answers: models, hello, 404, the gate's
refusals), ``app`` (``MockApp``: a Messages API request from arrival to answer, journaled
before its reply starts), ``server`` (``MockServer``: uvicorn on a real socket) and ``cli``
(``python -m mockapi``, ``loopprobe serve``).

May import: ``mockapi.journal``, ``mockapi.check``, ``mockapi.script``.
"""

__all__: list[str] = []
