"""The run's executors, one owner: the session that runs the code under test (started on first use, in this
process), the second lane's (``layer_conformance.lane``, -n 0), and the zygotes kept for the next run
(--keep-warm). The configure phase makes it, the collection phase opens the lane, the running phase asks them for
verdicts; closing them is this object's alone."""
from __future__ import annotations

from ..frameworks import FRAMEWORKS


def start_rank(framework: str) -> int:
    """Where a framework's executors start (and, with -n 0, its checks run): ``Framework.start_rank``."""
    return FRAMEWORKS[framework].start_rank if framework in FRAMEWORKS else len(FRAMEWORKS)


class Executors:
    def __init__(self, config, keep_warm: float | None):
        self.config = config
        self.keep_warm = keep_warm
        self.pythons: dict = {}              # --executor-python, set once the configure phase has parsed it
        self.kept: list[dict] = []           # the zygotes this run leaves running for the next (--keep-warm)
        self.lane = None                     # with -n 0, the second lane the ALONGSIDE checks run on
        self._session = None

    @property
    def session(self):
        """The executors that run the code under test (started on first use, in this process)."""
        if self._session is None:
            from ..boundary import Session
            from ..runner import DEFAULT_MEMORY_LIMIT_GIB
            limit = self.config.getoption("memory_limit")
            self._session = Session(self.pythons, DEFAULT_MEMORY_LIMIT_GIB if limit is None else limit,
                                    self.config.getoption("sandbox"), keep_warm=self.keep_warm)
        return self._session

    @property
    def sessions(self) -> list:
        """The sessions started so far: the main one's and the lane's."""
        return [s for s in (self._session, getattr(self.lane, "session", None)) if s is not None]

    def zygote_of(self, framework: str):
        """The run's zygote of ``framework`` (started already where --framework named it)."""
        if framework not in FRAMEWORKS:
            return None
        return self.session._executor(self.session.zygotes, "zygote", framework)

    def open_lane(self, checks) -> None:
        """The second lane, for ``checks`` (layer_conformance.lane)."""
        from ..lane import Lane
        self.lane = Lane(self.session, sorted(checks), start_rank)

    def close(self):
        if self.lane is not None:
            self.lane.close()
            self.lane = None
        if self._session is not None:
            self.kept += self._session.kept()
            self._session.close()
            self._session = None
