"""The minify worker: the process that imports torch and reduces one captured graph (``python -m
bot.minify.worker``, or forked from the minify command's fork server; started by
:mod:`bot.minify.reduce`).

Modules: ``main`` (the process: its commands and its steps, sanity -> reduce -> config -> final ->
readout -> bisect), ``problem`` (one reduction's state and the one cached oracle every query goes
through), ``passes`` (the reduction as one ordered list of passes, their runner and statistics),
``search`` (culprit search, reach-back), ``cleanup`` (the cleanup passes to a 1-minimal graph),
``graph`` (graph surgery, no queries), ``hints`` (what is known before the search), ``predicate``
(how a candidate is compiled and judged), ``readout`` (each op against fp64), ``configdiff`` (the
true and minimal config diffs), ``plain``, ``short`` and ``plaincode`` (the plain and short repro
writers), ``child`` (how the minify stage's children start). This package imports nothing of the
minify stage's parent side but its typed records (:mod:`bot.minify.records`;
``tests/test_minify_shape.py`` checks it).
"""
