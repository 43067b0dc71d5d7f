"""The client's folders, and the only way the harness touches them.

``folders``: a probe's folder (``sandbox/`` the client's home, workspace and tmp; ``inputs/``
read-only inside; ``evidence/`` never shown) and the environment a client starts with;
``files``: every read and write of ``sandbox/`` (no link followed, only regular files read,
capped); ``client_files``: what the client left there, read for the evidence. Everything
under ``sandbox/`` is hostile input. ``view``: what of the host every bubblewrap sandbox
shows (the system's directories, a few /etc files, the interpreter), without a capability.

May import: ``probes.core``.
"""

__all__: list[str] = []
