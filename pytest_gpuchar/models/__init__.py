"""Performance models fed by the suite: Many-BSP (seed 002) and an Accel-Sim config fragment."""
