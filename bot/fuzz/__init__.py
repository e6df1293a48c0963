"""The fuzzer: generated programs as a model source (``--suite fuzz``, bot/suites/fuzz.py).

``ops`` the op catalog, ``leaves`` typed inputs and parameters (dtype, shape, layout), ``generate``
one valid program from (seed, index), ``program`` its source and its module, ``campaign`` the
campaign's summary. A finding goes through the same pipeline as any check: capture, minify, verify,
signature, one issue per bug.
"""
