"""``python -m tessera.cli ARGS`` = ``tessera ARGS``: the form ``torchrun`` launches
(``torchrun --nproc-per-node 4 -m tessera.cli train cosmoflow --data-parallel 2 --spatial 2x1x1``)."""

from . import main

main()
