"""In-kernel Gluon helpers that several chapters share (each introduced by the chapter that teaches it).

==============  ==============================================================================
``scope``       timeline scopes: ``with scope("load", INSTRUMENT):``, no code unless proton records
``sync``        the init fence, this CTA's rank, arrivals and waits at cluster scope (chapter 2)
``ring``        the stage ring and its cluster-wide release (chapter 3)
``operands``    operand CGA layouts, NVMMA layouts, descriptors, the checks TMA needs (chapter 3)
``matmul``      the validated front end of the persistent matmul wrappers (chapters 5 and 6)
``tile_order``  tile orders in Python and in Gluon, and their L2 traffic (Part 0, chapters 5 and 6)
==============  ==============================================================================
"""
