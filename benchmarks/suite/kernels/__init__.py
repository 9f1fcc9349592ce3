"""The suite's Triton kernels, one file per family, each written as a user commonly writes it.

Every file imports only torch and triton: ``tritune capture`` copies a kernel's file and replay
imports that copy on its own, so a kernel file must not import its siblings or the package.
"""
