"""`kchaos analyze DIR`: many checked runs together (a night of runs), through Spark."""
