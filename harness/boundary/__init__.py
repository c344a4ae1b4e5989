"""The process boundary between the judge and the code it judges.

The judge's side of it: ``client``, ``remote`` and ``session`` (and ``process``, ``stderr``, ``warm``, ``sandbox``)
run in the judge (the pytest process). What runs in each executor process is ``layer_conformance.layerside``;
``layer_conformance.wire`` is the plain data and typed replies both sides exchange.
"""
from .client import CheckTimeout, ExecutorLost, RemoteError
from .remote import Rebuild, Remote, RemoteAdapter
from .session import LoadFailed, Session, detect

__all__ = ["CheckTimeout", "ExecutorLost", "LoadFailed", "Rebuild", "Remote", "RemoteAdapter", "RemoteError",
           "Session", "detect"]
