"""Each chapter's benchmark, all on one GPU in one run with the ceilings of that run, recorded as
``results/<gpu>/<name>.json`` by ``python -m multicta_kernels.cli.bench NAME --out ...``: ``foundations``
(the device's properties), ``softmax`` (and its sweeps), ``barriers``, ``multicast``, ``clc_matmul``,
``hopper_matmul`` (and the L2 bytes through ncu). The chapters keep their shapes and configurations."""
