"""The face: the Python API (``api``, also ``from attenio import attention, …``) and the command
line (``cli``), the only layers that may import every other."""
