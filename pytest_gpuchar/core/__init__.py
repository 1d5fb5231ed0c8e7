"""The pipeline's core, knowing no topic: arch names, PTX frame and bodies, offline tools,
driver JIT, SASS parsing, verification, the Probe type, compilation, launching, fitting."""
