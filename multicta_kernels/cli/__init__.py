"""The command lines: ``python -m multicta_kernels.cli.bench NAME --out results/<gpu>/NAME.json`` records a
benchmark; ``python -m multicta_kernels.cli.doctor`` checks every live kernel on a new node (``selftests``), in
child processes with time limits, and ``--record --bench`` adds the Blackwell recordings (``recorders``)."""
