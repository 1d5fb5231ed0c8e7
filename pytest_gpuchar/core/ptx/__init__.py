"""PTX text for probes: the one kernel frame (frame.py), instruction templates and the
dependent/independent bodies built from them (chains.py), module headers (module.py)."""
from .chains import CHAIN_STYLES, Body, Template, dependent_chain, independent_ops
from .frame import (LOOP_PARAMS, SLOT_BYTES, Clock, InputSlot, Kernel, Operand, Registers,
                    loop_kernel, operand_kernel, out_bytes)
from .module import header, module

__all__ = ["CHAIN_STYLES", "Body", "Template", "dependent_chain", "independent_ops",
           "LOOP_PARAMS", "SLOT_BYTES", "Clock", "InputSlot", "Kernel", "Operand",
           "Registers", "loop_kernel", "operand_kernel", "out_bytes", "header", "module"]
