"""A request read and checked before any rule sees it, refused as the real API refuses it.

``requests`` (size, headers, JSON and the required fields: ``BadRequest``),
``repeated_parts`` (the large parts a body repeats, parsed once), ``validation`` (what the
real API refuses with 400, and the ledger of where each rule and wording comes from),
``messages`` (the conversation: each message, its blocks, ``tool_use`` paired with
``tool_result``), ``request_shapes`` (``thinking``, ``tools``, image and document sources,
and the wording every refusal shares), ``model_limits`` (each known model's most output
tokens) and ``targets`` (request targets that cannot be read two ways).

May import: ``mockapi.journal``. Not ``mockapi.script``, beside it: a request is checked
without knowing the scenario.
"""

__all__: list[str] = []
