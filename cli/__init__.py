"""``tessera.cli``: the ``tessera`` command, on top of the compiler, the models and the
training companion.  Nothing imports this package; it imports them.

Commands: ``compile``, ``emulate``, ``verify``, ``inspect`` (:mod:`.compile`), ``check`` (:mod:`.check`), ``synth``
(:mod:`.synth`), ``estimate``
(:mod:`.estimate`), ``models``, ``train``, ``demo`` (:mod:`.train`), ``calibrate``, ``plan``
(:mod:`.plan`); exit codes in docs/cli.md.  ``python -m tessera.cli ARGS`` is ``tessera ARGS``
(the form ``torchrun`` launches for distributed training).
"""

from .app import main  # the group loads each command's module when the command runs

__all__ = ["main"]
