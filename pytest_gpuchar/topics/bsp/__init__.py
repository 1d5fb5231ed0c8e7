"""Many-BSP predictions (seed 002): the report's Hotspot, KNN and MM kernels in PTX, their
BLOCK description derived from that PTX and the suite's own measurements, predicted against
the whole-kernel cycles measured on the GPU."""
