"""``python -m tessera.training ARGS`` = ``tessera ARGS``: the form ``torchrun`` launches
(``torchrun --nproc-per-node 4 -m tessera.training train cosmoflow --data-parallel 2
--spatial 2x1x1``)."""

from ..compiler.cli import main

main()
