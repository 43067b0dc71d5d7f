"""The scenario language: what the scripted model says, and which rule answers a request.

``replies`` (messages, API errors and raw bytes, as data), ``sse`` (the wire's event
framing), ``plan`` (a body as steps: sends, sleeps, one end or drop), ``events`` (a reply
prepared for the wire: its events, its JSON body, error bodies), ``matching`` (a request's
kind and facts, and whether a rule matches them), ``scenario_errors`` (what a scenario that
cannot be used is told), ``scenario`` (the rules, loaded and validated) and ``decide``
(``Script``: a scenario being played, which rule answers given everything answered before).

One package rather than replies on a floor below scenarios: a scenario is its replies, and
installing one prepares each reply for the wire (``scenario`` imports ``events``), so the
language and its wire form are read and changed together. Inside it, each module imports
only those before it: replies and sse, plan, events, matching and scenario_errors, scenario,
decide.

May import: ``mockapi.journal``. Not ``mockapi.check``, beside it: a rule is decided on a
request already checked.
"""

__all__: list[str] = []
