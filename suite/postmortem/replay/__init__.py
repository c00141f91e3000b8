"""What-if replay of a run's training steps: graph.py rebuilds and replays a step, whatif.py idealises and changes
it, load.py reads the run, timeline.py draws the ideal step, cli.py is ``make what-if``."""
