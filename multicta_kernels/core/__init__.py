"""The ground floor: what the GPU can do, validation before anything is compiled, and checks of results.

============  ==============================================================================
``hardware``  features (clusters, wgmma, tcgen05), the limits kernels obey, the error raised
              when a feature is missing, the lens's targets; ``pretend`` for the dry run
``isolation`` a Triton call in a child process: an abort becomes an exception
``validate``  one check per kind of value (count, power of two, index, bool, choice, finite number,
              bases, tensor): one line naming the parameter, before any hardware is asked
``dtypes``    the dtypes the book's kernels take (Gluon type, signature name, size, rounding)
``layouts``   ownership maps parsed from Triton's own layout views; the cga model and its checks
``accuracy``  element-wise comparisons against PyTorch (tests, doctor, notebooks)
``dryrun``    launches stopped after compiling (a B200 walked to its launches on a CPU)
``occupancy`` how many clusters of a compiled kernel are resident at once
============  ==============================================================================

Nothing here imports another layer of the package.
"""
