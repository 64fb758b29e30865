"""What a long compiler call (``compile_model``, ``verify``) tells its caller as it goes: the
:class:`Observer` protocol, and :data:`SILENT`, the observer that shows nothing.  The
``tessera`` command passes one that draws status lines and progress bars."""

from __future__ import annotations

from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Callable, Iterator, Protocol

#: Called with the number of items just done.
Advance = Callable[[int], None]


class Observer(Protocol):
    """Receives a call's stages, its notices and the progress of its long loops."""

    def stage(self, text: str) -> AbstractContextManager[object]:
        """A step under way while the context is open (e.g. 'reading and typing the model')."""

    def notice(self, line: str) -> None:
        """A line the user should read (e.g. the partition chosen, a trailing Softmax left out)."""

    def progress(self, text: str, total: int, unit: str = "samples") -> AbstractContextManager[Advance]:
        """A loop over ``total`` items of ``unit``: the context yields the function to call as items finish."""


class Silent:
    """The observer that shows nothing."""

    def stage(self, text: str) -> AbstractContextManager[object]:
        return nullcontext()

    def notice(self, line: str) -> None:
        pass

    @contextmanager
    def progress(self, text: str, total: int, unit: str = "samples") -> Iterator[Advance]:
        yield lambda done: None


SILENT = Silent()

__all__ = ["Advance", "Observer", "SILENT", "Silent"]
