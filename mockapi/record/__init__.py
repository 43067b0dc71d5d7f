"""Record, then replay: a proxy in front of any Messages API endpoint that writes what passed.

``proxy`` (``RecordingProxy`` on a socket, ``loopprobe record``; what is written, and the
proxy's own choices), ``recorder`` (``Recorder``: the proxy as an ASGI app), ``exchange``
(one relayed exchange: what came back, what the recording keeps, the rule it becomes),
``upstream_reply`` (the upstream's answer as a scenario reply) and ``recorded`` (the
scenario a recording writes, rule by rule). Their public names are here:
``mockapi.record.RecordingProxy`` is the documented path.

May import: every package of ``mockapi`` below it (``serve``: the recorder runs on the
mock's server and classifier).
"""

from __future__ import annotations

from mockapi.check.targets import UpstreamError, check_upstream
from mockapi.record.proxy import RecordingProxy, record
from mockapi.record.recorder import RECORDED_PATH, Recorder
from mockapi.record.upstream_reply import reply_from_exchange

__all__ = ["RECORDED_PATH", "Recorder", "RecordingProxy", "UpstreamError", "check_upstream",
           "record", "reply_from_exchange"]
