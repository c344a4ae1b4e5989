"""The process boundary between the judge and the code it judges.

``client`` and ``session`` run in the judge (the pytest process); ``server`` runs in each
executor process; ``wire`` is the plain data both sides exchange.
"""
from .client import CheckTimeout, ExecutorLost, Rebuild, Remote, RemoteAdapter, RemoteError
from .session import LoadFailed, Session, detect

__all__ = ["CheckTimeout", "ExecutorLost", "LoadFailed", "Rebuild", "Remote", "RemoteAdapter", "RemoteError",
           "Session", "detect"]
