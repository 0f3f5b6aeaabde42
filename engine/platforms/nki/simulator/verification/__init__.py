"""Record, then verify: the executable program a simulation leaves and its replay."""
