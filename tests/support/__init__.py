"""Test-support code: helpers the tests share, which reach the library only through its public
seams (e.g. :mod:`support.cudasim`, the CPU simulator of the ``cuda`` backend)."""
