"""Measuring the machine under load, for every feature: child-process workers with a timeout, the STREAM triad
(NumPy and a compiled-C reference), and the torch GPU worker.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""
