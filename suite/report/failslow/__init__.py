"""A fail-slow detector's scores, offline, from stored trials: ``score`` (the rules: found, missed, false
alarms, localisation, time to detect, sensitivity below the 10% step slowdown) and ``intervals`` (the
intervals each figure carries: Wilson, Garwood, order statistics, a seeded bootstrap); ``bench`` (make
failslow-bench: the seeded trials run and scored), ``trials`` (drawn, then read back), ``table`` (its table,
page and confusion picture) and ``compare`` (two benches side by side, make compare)."""
